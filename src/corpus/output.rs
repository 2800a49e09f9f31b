//! Tool output as real terminal agents record it: multi-line shell sessions
//! behind a prompt, Python tracebacks, pytest and compiler reports with ANSI
//! colours, progress bars redrawn with carriage returns, CRLF line ends,
//! tab-separated listings, JSON printed by a tool, and now and then an output
//! of about a megabyte. Log lines mix in the corpus words (English and
//! Chinese), so searches over tool output have something to find.

use super::{sentence, Rng, EN};

const HOSTS: &[&str] = &["4f2a9c1e7b3d", "CONTAINER_ID", "devbox", "runner-7"];
const MODULES: &[&str] = &["app", "worker", "ingest", "server", "utils", "cli"];
const PACKAGES: &[&str] = &["numpy", "requests", "pydantic", "torch", "yaml", "httpx"];
const EXCEPTIONS: &[&str] = &[
    "ModuleNotFoundError: No module named '{pkg}'",
    "KeyError: '{word}'",
    "ValueError: invalid literal for int() with base 10: '{word}'",
    "FileNotFoundError: [Errno 2] No such file or directory: '/app/{word}.json'",
    "TimeoutError: timed out after 30 seconds",
    "AssertionError: expected {n} but got {m}",
];
const COMMANDS: &[&str] = &[
    "ls -la",
    "cat README.md",
    "python -m pytest -q",
    "pip install -r requirements.txt",
    "make build",
    "git status",
    "grep -rn TODO src",
    "python main.py --config config.yaml",
    "cargo build",
    "curl -s localhost:8080/health",
];

/// One tool output, as the decoded text the tool printed.
pub(crate) fn tool_output(rng: &mut Rng) -> String {
    // About one output in 25,000 is a megabyte: a log dumped whole.
    if rng.below(25_000) == 0 {
        return huge_log(rng, 1 << 20);
    }
    let body = match rng.below(10) {
        0 | 1 => traceback(rng),
        2 => pytest(rng),
        3 => compiler(rng),
        4 => json_report(rng),
        5 => progress(rng),
        6 => listing(rng),
        _ => {
            let n = 3 + rng.below(12) as usize;
            log_lines(rng, n)
        }
    };
    let mut out = terminal(rng, &body);
    if rng.chance(8) {
        // Output captured through a Windows tool or a raw pty: CRLF.
        out = out.replace('\n', "\r\n");
    }
    out
}

fn fill(rng: &mut Rng, template: &str) -> String {
    let pkg = *rng.pick(PACKAGES);
    let word = *rng.pick(EN);
    template
        .replace("{pkg}", pkg)
        .replace("{word}", word)
        .replace("{n}", &rng.below(100).to_string())
        .replace("{m}", &rng.below(100).to_string())
}

/// The output inside a shell session: prompt, command, output, next prompt.
fn terminal(rng: &mut Rng, body: &str) -> String {
    let host = *rng.pick(HOSTS);
    let cmd = *rng.pick(COMMANDS);
    let prompt = if rng.chance(30) {
        // A coloured prompt, as bash prints it with a colour PS1, and a
        // window title set by OSC.
        format!("\u{1b}]0;root@{host}: /app\u{7}\u{1b}[01;32mroot@{host}\u{1b}[00m:\u{1b}[01;34m/app\u{1b}[00m# ")
    } else {
        format!("root@{host}:/app# ")
    };
    let mut s = String::with_capacity(body.len() + 128);
    if rng.chance(50) {
        s.push_str("New Terminal Output:\n\n");
    }
    s.push_str(&prompt);
    s.push_str(cmd);
    s.push('\n');
    s.push_str(body);
    if !body.ends_with('\n') {
        s.push('\n');
    }
    s.push_str(&prompt);
    s.push('\n');
    s
}

fn log_lines(rng: &mut Rng, n: usize) -> String {
    let mut s = String::new();
    for i in 0..n {
        let level = *rng.pick(&["INFO", "WARN", "ERROR", "DEBUG"]);
        let coloured = rng.chance(25);
        let tag = match (level, coloured) {
            ("ERROR", true) => "\u{1b}[31mERROR\u{1b}[0m".to_string(),
            ("WARN", true) => "\u{1b}[33mWARN\u{1b}[0m".to_string(),
            (l, _) => l.to_string(),
        };
        let (day, minute, milli) = (1 + rng.below(28), rng.below(60), rng.below(1000));
        let module = *rng.pick(MODULES);
        let words = 6 + rng.below(10) as usize;
        s.push_str(&format!(
            "2026-07-{day:02} 10:{minute:02}:{:02},{milli:03} {tag}\t[{module}] {}\n",
            (i as u64 * 7) % 60,
            sentence(rng, words)
        ));
    }
    s
}

fn traceback(rng: &mut Rng) -> String {
    let module = *rng.pick(MODULES);
    let n = 1 + rng.below(3) as usize;
    let mut s = log_lines(rng, n);
    s.push_str("Traceback (most recent call last):\n");
    s.push_str(&format!(
        "  File \"/app/{module}.py\", line {}, in <module>\n    main()\n",
        10 + rng.below(200)
    ));
    s.push_str(&format!(
        "  File \"/app/{module}.py\", line {}, in main\n    result = run(config[\"{}\"])\n",
        10 + rng.below(200),
        rng.pick(EN)
    ));
    s.push_str(&format!(
        "  File \"/usr/lib/python3.11/importlib/__init__.py\", line 126, in import_module\n    return _bootstrap._gcd_import(name[level:], package, level)\n{}\n",
        {
            let t = *rng.pick(EXCEPTIONS);
            fill(rng, t)
        }
    ));
    s
}

fn pytest(rng: &mut Rng) -> String {
    let n = 3 + rng.below(40);
    let failed = rng.below(3);
    let red = |t: &str| format!("\u{1b}[31m{t}\u{1b}[0m");
    let green = |t: &str| format!("\u{1b}[32m{t}\u{1b}[0m");
    let mut s = String::from(
        "\u{1b}[1m============================= test session starts ==============================\u{1b}[0m\n",
    );
    s.push_str("platform linux -- Python 3.11.7, pytest-8.2.0, pluggy-1.5.0\nrootdir: /app\n");
    s.push_str(&format!("collected {n} items\n\n"));
    let module = *rng.pick(MODULES);
    let dots: String = (0..n)
        .map(|i| if i < failed { red("F") } else { green(".") })
        .collect();
    s.push_str(&format!(
        "tests/test_{module}.py {dots}{:>20}\n\n",
        "[100%]"
    ));
    if failed > 0 {
        let word = *rng.pick(EN);
        s.push_str(
            "=================================== FAILURES ===================================\n",
        );
        s.push_str(&format!(
            "\u{1b}[31m\u{1b}[1m___________________________ test_{word} ____________________________\u{1b}[0m\n\n"
        ));
        s.push_str(&format!(
            "    def test_{word}():\n>       assert handle(\"{word}\") == {}\n\u{1b}[1m\u{1b}[31mE       AssertionError: {}\u{1b}[0m\n\ntests/test_{module}.py:{}: AssertionError\n",
            rng.below(10),
            sentence(rng, 5),
            10 + rng.below(90)
        ));
        s.push_str(
            "=========================== short test summary info ============================\n",
        );
        s.push_str(&format!(
            "FAILED tests/test_{module}.py::test_{word} - AssertionError\n"
        ));
        s.push_str(&red(&format!(
            "========================= {failed} failed, {} passed in 0.{:02}s =========================",
            n - failed,
            rng.below(100)
        )));
    } else {
        s.push_str(&green(&format!(
            "============================== {n} passed in 0.{:02}s ===============================",
            rng.below(100)
        )));
    }
    s.push('\n');
    s
}

fn compiler(rng: &mut Rng) -> String {
    let word = *rng.pick(EN);
    if rng.chance(50) {
        format!(
            "src/{m}.c: In function '{word}':\nsrc/{m}.c:{l}:5: error: implicit declaration of function '{w2}' [-Werror=implicit-function-declaration]\n   {l} |     {w2}(ctx, len);\n      |     ^~~~\ncc1: all warnings being treated as errors\nmake: *** [Makefile:12: build/{m}.o] Error 1\n",
            m = rng.pick(MODULES),
            l = 10 + rng.below(300),
            w2 = rng.pick(EN),
        )
    } else {
        format!(
            "   \u{1b}[1m\u{1b}[32mCompiling\u{1b}[0m {m} v0.1.0 (/app)\n\u{1b}[0m\u{1b}[1m\u{1b}[38;5;9merror[E0425]\u{1b}[0m\u{1b}[0m\u{1b}[1m: cannot find value `{word}` in this scope\u{1b}[0m\n\u{1b}[0m  \u{1b}[0m\u{1b}[0m\u{1b}[1m\u{1b}[38;5;12m--> \u{1b}[0m\u{1b}[0msrc/{m}.rs:{l}:9\n\n\u{1b}[1m\u{1b}[31merror\u{1b}[0m: could not compile `{m}` (bin \"{m}\") due to 1 previous error\n",
            m = rng.pick(MODULES),
            l = 10 + rng.below(300),
        )
    }
}

fn json_report(rng: &mut Rng) -> String {
    let items: Vec<serde_json::Value> = (0..=rng.below(4))
        .map(|i| {
            serde_json::json!({
                "id": i,
                "name": rng.pick(EN),
                "status": rng.pick(&["ok", "failed", "skipped"]),
                "detail": sentence(rng, 5),
            })
        })
        .collect();
    let v = serde_json::json!({
        "status": if rng.chance(50) { "error" } else { "ok" },
        "message": sentence(rng, 8),
        "items": items,
    });
    if rng.chance(50) {
        serde_json::to_string_pretty(&v).unwrap_or_default()
    } else {
        v.to_string()
    }
}

fn progress(rng: &mut Rng) -> String {
    let pkg = *rng.pick(PACKAGES);
    let mut s = format!("Collecting {pkg}\n  Downloading {pkg}-2.1.0-py3-none-any.whl\n");
    for p in [0, 25, 50, 75, 100] {
        s.push_str(&format!("\r     {:<30} {p:>3}%", "━".repeat(p * 30 / 100)));
    }
    s.push_str(&format!(
        "\nInstalling collected packages: {pkg}\nSuccessfully installed {pkg}-2.1.0\n"
    ));
    s
}

fn listing(rng: &mut Rng) -> String {
    let mut s = String::from("On branch main\nChanges not staged for commit:\n");
    for _ in 0..=rng.below(5) {
        s.push_str(&format!(
            "\tmodified:   src/{}/{}.py\n",
            rng.pick(MODULES),
            rng.pick(EN)
        ));
    }
    s.push_str("\ntotal 48\n");
    for _ in 0..2 + rng.below(6) {
        s.push_str(&format!(
            "-rw-r--r--\t1 root root\t{}\tJul 12 10:00\t{}.txt\n",
            rng.below(90_000),
            rng.pick(EN)
        ));
    }
    s
}

fn huge_log(rng: &mut Rng, bytes: usize) -> String {
    let mut s = String::with_capacity(bytes + 256);
    while s.len() < bytes {
        s.push_str(&log_lines(rng, 50));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_look_like_terminals() {
        let mut rng = Rng(5);
        let outs: Vec<String> = (0..400).map(|_| tool_output(&mut rng)).collect();
        let any = |f: &dyn Fn(&str) -> bool| outs.iter().any(|o| f(o));
        assert!(any(&|o| o.contains("root@") && o.lines().count() > 3));
        assert!(any(&|o| o.contains("Traceback (most recent call last)")));
        assert!(any(&|o| o.contains("\u{1b}[")));
        assert!(any(&|o| o.contains("\r\n")));
        assert!(any(&|o| o.contains('\t')));
        assert!(any(&|o| o.contains("\r ")));
        assert!(any(&|o| o.contains("\"status\"")));
    }
}
