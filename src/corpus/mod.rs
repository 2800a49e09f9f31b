//! Deterministic synthetic corpora for tests and benchmarks.
//!
//! Writes trajectories with mixed English and Chinese text, tool calls whose
//! results look like real terminal output (see [`output`]: most of a real
//! run's bytes are what its tools printed), reasoning, metrics (`prompt_tokens`, `completion_tokens`,
//! `cached_tokens`, `cost_usd`, `extra.latency_ms`), and `extra` carrying
//! `tags`, `priority` and `score`; ATIF runs embed a subagent every few runs.
//! The same options always produce the same bytes.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;

use serde_json::{json, Value};

mod output;

/// SplitMix64: small, fast, deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
    fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
}

const EN: &[&str] = &[
    "the",
    "service",
    "request",
    "failed",
    "after",
    "a",
    "timeout",
    "while",
    "reading",
    "from",
    "database",
    "retry",
    "with",
    "backoff",
    "check",
    "logs",
    "connection",
    "pool",
    "exhausted",
    "deploy",
    "build",
    "tests",
    "passed",
    "error",
    "handler",
    "config",
    "file",
    "missing",
    "update",
    "schema",
    "migration",
    "query",
    "latency",
    "cache",
    "miss",
    "worker",
    "queue",
    "job",
    "scheduled",
    "ipython",
    "kernel",
    "restart",
    "parse",
    "json",
    "output",
    "token",
    "limit",
    "exceeded",
    "network",
    "unreachable",
    "permission",
    "denied",
    "memory",
    "leak",
    "profile",
];
const ZH: &[&str] = &[
    "请求",
    "超时",
    "数据库",
    "连接",
    "失败",
    "重试",
    "日志",
    "配置",
    "文件",
    "缺失",
    "部署",
    "构建",
    "测试",
    "通过",
    "错误",
    "处理",
    "缓存",
    "命中",
    "队列",
    "任务",
    "调度",
    "内存",
    "泄漏",
    "网络",
    "不可达",
    "权限",
    "拒绝",
    "解析",
    "输出",
    "模型",
    "推理",
    "工具",
    "调用",
    "结果",
    "检查",
    "修复",
    "更新",
    "迁移",
    "查询",
    "延迟",
];
const TOOLS: &[&str] = &[
    "bash",
    "read_file",
    "write_file",
    "search",
    "python",
    "http_get",
    "sql_query",
];
const MODELS: &[&str] = &[
    "gpt-4o",
    "claude-sonnet-4",
    "qwen2.5-72b",
    "deepseek-v3",
    "llama-3.1-70b",
];
const AGENTS: &[&str] = &["coder", "researcher", "planner", "terminus-2", "openhands"];
const TAGS: &[&str] = &[
    "important",
    "flaky",
    "regression",
    "perf",
    "security",
    "docs",
];

fn sentence(rng: &mut Rng, words: usize) -> String {
    let zh = rng.chance(40);
    let mut s = String::new();
    for i in 0..words {
        if zh {
            let w: &&str = rng.pick(ZH);
            s.push_str(w);
            if rng.chance(15) {
                s.push('，');
            }
        } else {
            if i > 0 {
                s.push(' ');
            }
            let w: &&str = rng.pick(EN);
            s.push_str(w);
        }
    }
    s.push(if zh { '。' } else { '.' });
    s
}

fn sentence_in(rng: &mut Rng, base: usize, spread: u64) -> String {
    let n = base + rng.below(spread) as usize;
    sentence(rng, n)
}

fn timestamp(base: u64, offset_s: u64) -> String {
    let t = base + offset_s;
    let (days, rem) = (t / 86_400, t % 86_400);
    // Civil date from days since 1970-01-01.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// One ATIF observation result: terminal output as a string (terminus-2
/// names no call, as its real runs do), now and then as a list of content
/// parts, with a screenshot part in a few.
fn observation_result(rng: &mut Rng, agent: &str, call_id: &str, step: u64) -> Value {
    let text = output::tool_output(rng);
    let content = if rng.chance(10) {
        let mut parts = vec![json!({"type": "text", "text": text})];
        if rng.chance(30) {
            parts.push(json!({"type": "image", "source": {"media_type": "image/png", "path": format!("images/step-{step}.png")}}));
        }
        Value::Array(parts)
    } else {
        Value::String(text)
    };
    if agent == "terminus-2" {
        json!({"content": content})
    } else {
        json!({"source_call_id": call_id, "content": content})
    }
}

/// One ATIF trajectory node with `steps` steps.
fn atif_node(
    rng: &mut Rng,
    run: u64,
    steps: u64,
    session: &str,
    trajectory: &str,
    base: u64,
) -> Value {
    let agent = rng.pick(AGENTS);
    let model = rng.pick(MODELS);
    let mut out = Vec::with_capacity(steps as usize);
    out.push(json!({"step_id": 1, "timestamp": timestamp(base, 0), "source": "system", "message": format!("You are {agent}. {}", sentence(rng, 12))}));
    out.push(json!({"step_id": 2, "timestamp": timestamp(base, 1), "source": "user", "message": sentence(rng, 18)}));
    let mut id = 3;
    let mut call_no = 0;
    while id <= steps.max(3) {
        let ts = timestamp(base, id * 7);
        let mut step = json!({
            "step_id": id,
            "timestamp": ts,
            "source": "agent",
            "model_name": model,
            "message": sentence_in(rng, 14, 20),
            "metrics": {
                "prompt_tokens": 200 + rng.below(4000),
                "completion_tokens": 20 + rng.below(600),
                "cached_tokens": rng.below(200),
                "cost_usd": (rng.below(5000) as f64) / 100_000.0,
                "extra": {"latency_ms": 100 + rng.below(5000)}
            },
            "extra": {
                "tags": [rng.pick(TAGS), rng.pick(TAGS)],
                "priority": rng.below(4),
                "score": (rng.below(1000) as f64) / 1000.0
            }
        });
        if rng.chance(60) {
            step["reasoning_content"] = json!(sentence_in(rng, 10, 12));
        }
        if rng.chance(65) {
            call_no += 1;
            let tool = rng.pick(TOOLS);
            let call_id = format!("call-{run}-{call_no}");
            step["tool_calls"] = json!([{
                "tool_call_id": call_id,
                "function_name": tool,
                "arguments": {"command": sentence(rng, 4), "timeout": 30},
                "extra": {"duration_ms": rng.below(3000)}
            }]);
            step["observation"] =
                json!({"results": [observation_result(rng, agent, &call_id, id)]});
        }
        out.push(step);
        id += 1;
        if id <= steps && rng.chance(15) {
            out.push(json!({"step_id": id, "timestamp": timestamp(base, id * 7), "source": "user", "message": sentence(rng, 8)}));
            id += 1;
        }
    }
    json!({
        "schema_version": "ATIF-v1.7",
        "session_id": session,
        "trajectory_id": trajectory,
        "agent": {"name": agent, "version": "1.0.0", "model_name": model, "extra": {"team": format!("team-{}", run % 7)}},
        "steps": out,
        "final_metrics": {"total_steps": steps},
        "extra": {"tags": [rng.pick(TAGS)], "priority": rng.below(4), "score": (rng.below(1000) as f64) / 1000.0}
    })
}

fn atif_run(rng: &mut Rng, run: u64, steps: u64, subagent: bool) -> Value {
    let base = 1_780_000_000 + run * 3_600;
    let session = format!("session-{run:07}");
    let mut root = atif_node(rng, run, steps, &session, &format!("traj-{run:07}"), base);
    if subagent {
        let child_id = format!("traj-{run:07}-sub");
        let child = atif_node(
            rng,
            run * 1_000 + 1,
            (steps / 4).max(3),
            &session,
            &child_id,
            base + 60,
        );
        let spawn = json!({
            "step_id": root["steps"].as_array().unwrap().len() + 1,
            "source": "agent",
            "message": "delegating",
            "tool_calls": [{"tool_call_id": format!("spawn-{run}"), "function_name": "delegate", "arguments": {"task": "sub"}}],
            "observation": {"results": [{"source_call_id": format!("spawn-{run}"), "subagent_trajectory_ref": [{"trajectory_id": child_id}]}]}
        });
        root["steps"].as_array_mut().unwrap().push(spawn);
        root["subagent_trajectories"] = json!([child]);
    }
    root
}

fn actf_run(rng: &mut Rng, run: u64, steps: u64) -> Value {
    let base = 1_780_000_000 + run * 3_600;
    let mut out = Vec::new();
    for s in 1..=steps {
        // Codex-style agents record a shell command with its output on the
        // call itself (`aggregated_output`), and no observation for it.
        if rng.chance(30) {
            let call = json!({"type": "command_execution", "id": format!("t-{run}-{s}"), "command": sentence(rng, 4),
                "aggregated_output": output::tool_output(rng), "exit_code": rng.below(3), "status": "completed"});
            out.push(json!({
                "step_id": s,
                "assistant_content": {"content": sentence(rng, 12), "tool_calls": [call.clone()]},
                "metric": {"prompt_tokens_len": 100 + rng.below(2000), "completion_tokens_len": 10 + rng.below(300), "llm_infer_ms": rng.below(3000), "env_action_ms": rng.below(800), "stop_reason": "tool_use"},
                "system_prompt": "You are a careful engineer.",
                "user_content": if s == 1 { sentence(rng, 16) } else { String::new() },
                "tools": [call],
                "started_at": timestamp(base, s * 5),
                "finished_at": timestamp(base, s * 5 + 3)
            }));
            continue;
        }
        let call = json!({"type": "tool_use", "id": format!("t-{run}-{s}"), "name": rng.pick(TOOLS), "input": {"command": sentence(rng, 4)}});
        out.push(json!({
            "step_id": s,
            "assistant_content": {"content": sentence(rng, 12), "reasoning_content": sentence(rng, 8), "tool_calls": [call.clone()]},
            "metric": {"prompt_tokens_len": 100 + rng.below(2000), "completion_tokens_len": 10 + rng.below(300), "llm_infer_ms": rng.below(3000), "env_action_ms": rng.below(800), "stop_reason": "tool_use"},
            "system_prompt": "You are a careful engineer.",
            "user_content": if s == 1 { sentence(rng, 16) } else { String::new() },
            "tools": [call.clone()],
            "observation": [{"tool_use_id": call["id"], "type": "tool_result", "content": output::tool_output(rng), "is_error": false}],
            "started_at": timestamp(base, s * 5),
            "finished_at": timestamp(base, s * 5 + 3)
        }));
    }
    let correct = rng.chance(50);
    json!({
        "task_id": format!("task-{run:07}"), "category": "software-engineering", "k": 1, "correct": correct,
        "attempts_tried": 1, "solved_at": if correct { json!("1") } else { Value::Null },
        "attempts": {"1": {
            "correct": correct, "final_answer": null, "ground_truth": sentence(rng, 6), "status": "completed",
            "score": if correct { 1.0 } else { 0.0 }, "error": "", "artifacts": {}, "extra": {}, "analysis_result": {}, "meta": {},
            "trajectory": {"schema_version": "ACTF_v1.0", "started_at": timestamp(base, 0), "finished_at": timestamp(base, steps * 5 + 5), "steps": out}
        }}
    })
}

fn openai_example(rng: &mut Rng, steps: u64) -> Value {
    let mut messages = vec![
        json!({"role": "system", "content": sentence(rng, 10)}),
        json!({"role": "user", "content": sentence(rng, 16)}),
    ];
    let mut n = 0;
    while (messages.len() as u64) < steps {
        n += 1;
        let id = format!("call_{n}");
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": rng.pick(TOOLS), "arguments": format!("{{\"q\":\"{}\"}}", rng.pick(EN))}}]}));
        messages
            .push(json!({"role": "tool", "tool_call_id": id, "content": output::tool_output(rng)}));
        messages.push(json!({"role": "assistant", "content": sentence(rng, 14), "reasoning_content": sentence(rng, 6)}));
    }
    json!({"messages": messages, "tools": TOOLS.iter().map(|t| json!({"type": "function", "function": {"name": t}})).collect::<Vec<_>>()})
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct Options {
    /// Output directory (created).
    pub out: PathBuf,
    /// Number of trajectories (runs).
    pub runs: u64,
    /// Average steps per trajectory.
    pub steps: u64,
    /// Random seed.
    pub seed: u64,
    /// `atif`, `actf` or `openai`.
    pub format: String,
    /// Embed a subagent every K ATIF runs (0: never).
    pub subagent_every: u64,
    /// Files per sub-directory.
    pub files_per_dir: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            out: PathBuf::from("corpus"),
            runs: 10,
            steps: 20,
            seed: 42,
            format: "atif".into(),
            subagent_every: 10,
            files_per_dir: 1000,
        }
    }
}

/// Generate a corpus; returns the bytes written.
pub fn generate(a: &Options) -> std::io::Result<u64> {
    let mut rng = Rng(a.seed);
    std::fs::create_dir_all(&a.out)?;
    let mut bytes = 0u64;
    let mut lines = String::new();
    for run in 0..a.runs {
        let steps = (a.steps / 2 + rng.below(a.steps.max(1))).max(3);
        let dir = a
            .out
            .join(format!("part-{:04}", run / a.files_per_dir.max(1)));
        match a.format.as_str() {
            "atif" => {
                let subagent =
                    a.subagent_every > 0 && run % a.subagent_every == a.subagent_every - 1;
                let v = atif_run(&mut rng, run, steps, subagent);
                std::fs::create_dir_all(&dir)?;
                let text = serde_json::to_vec(&v)?;
                bytes += text.len() as u64;
                std::fs::write(dir.join(format!("run-{run:07}.json")), text)?;
            }
            "actf" => {
                let v = actf_run(&mut rng, run, steps);
                std::fs::create_dir_all(&dir)?;
                let text = serde_json::to_vec(&v)?;
                bytes += text.len() as u64;
                std::fs::write(dir.join(format!("task-{run:07}.actf.json")), text)?;
            }
            "openai" => {
                let v = openai_example(&mut rng, steps);
                let _ = writeln!(lines, "{}", serde_json::to_string(&v).unwrap());
            }
            other => {
                return Err(std::io::Error::other(format!(
                    "unknown format {other} (atif|actf|openai)"
                )))
            }
        }
    }
    if !lines.is_empty() {
        bytes += lines.len() as u64;
        let mut f = std::fs::File::create(a.out.join("examples.jsonl"))?;
        f.write_all(lines.as_bytes())?;
    }
    Ok(bytes)
}
