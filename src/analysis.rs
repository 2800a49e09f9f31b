//! `analysis` reports: fixed SQL over the relations of one Dataset, planned
//! and run by the same engine as `query` (same limits, same output).

/// The reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    /// Source readiness and totals, per format.
    Overview,
    /// Activity per agent name and version.
    Agents,
    /// Declared (run-level) versus observed (step-level) models.
    Models,
    /// Tool calls per normalised function name, with duration coverage.
    Tools,
}

impl Report {
    /// Every report, in the order `--help` lists them.
    pub const ALL: [Report; 4] = [
        Report::Overview,
        Report::Agents,
        Report::Models,
        Report::Tools,
    ];

    /// Lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Report::Overview => "overview",
            Report::Agents => "agents",
            Report::Models => "models",
            Report::Tools => "tools",
        }
    }
}

/// The SQL of a report over schema `dataset`, returning at most `limit` rows.
pub fn sql(report: Report, limit: u64) -> String {
    let body = match report {
        Report::Overview => OVERVIEW,
        Report::Agents => AGENTS,
        Report::Models => MODELS,
        Report::Tools => TOOLS,
    };
    format!("{}\nLIMIT {limit}", body.trim_end())
}

/// One row per Source format: how many Sources and in which state, and what
/// the readable ones hold.
const OVERVIEW: &str = "
WITH src AS (
  SELECT format,
         count(*) AS sources,
         sum(CASE WHEN status = 'ready' THEN 1 ELSE 0 END) AS ready,
         sum(CASE WHEN status = 'degraded' THEN 1 ELSE 0 END) AS degraded,
         sum(CASE WHEN status = 'error' THEN 1 ELSE 0 END) AS error,
         sum(size_bytes) AS bytes
  FROM sources
  GROUP BY format
),
held AS (
  SELECT s.format,
         count(DISTINCT t.source_path || '|' || t.origin_path || '|' || t.run_id) AS runs,
         count(*) AS trajectories,
         sum(t.step_count) AS steps,
         sum(t.tool_call_count) AS tool_calls,
         min(t.started_at) AS first_started_at,
         max(coalesce(t.finished_at, t.started_at)) AS last_finished_at
  FROM trajectories t JOIN sources s ON t.source_path = s.source_path
  GROUP BY s.format
)
SELECT src.format, src.sources, src.ready, src.degraded, src.error, src.bytes,
       coalesce(held.runs, 0) AS runs,
       coalesce(held.trajectories, 0) AS trajectories,
       coalesce(held.steps, 0) AS steps,
       coalesce(held.tool_calls, 0) AS tool_calls,
       held.first_started_at, held.last_finished_at
FROM src LEFT JOIN held ON src.format = held.format
ORDER BY src.sources DESC, src.format
";

/// One row per agent identity (name, version).
const AGENTS: &str = "
SELECT coalesce(agent_name, '(unknown)') AS agent,
       coalesce(agent_version, '') AS version,
       count(DISTINCT source_path || '|' || origin_path || '|' || run_id) AS runs,
       count(*) AS trajectories,
       sum(step_count) AS steps,
       sum(tool_call_count) AS tool_calls,
       sum(total_prompt_tokens) AS prompt_tokens,
       sum(total_completion_tokens) AS completion_tokens,
       sum(total_cost_usd) AS cost_usd,
       min(started_at) AS first_seen,
       max(coalesce(finished_at, started_at)) AS last_seen
FROM trajectories
GROUP BY 1, 2
ORDER BY trajectories DESC, agent, version
";

/// One row per model name seen either as the agent's declared model or on
/// steps, with where it was seen.
const MODELS: &str = "
WITH declared AS (
  SELECT agent_model_name AS model, count(*) AS declared_trajectories
  FROM trajectories WHERE agent_model_name IS NOT NULL
  GROUP BY 1
),
observed AS (
  SELECT model_name AS model,
         count(*) AS steps,
         count(DISTINCT source_path || '|' || storage_ordinal) AS observed_trajectories,
         sum(prompt_tokens) AS prompt_tokens,
         sum(completion_tokens) AS completion_tokens,
         sum(cost_usd) AS cost_usd
  FROM steps WHERE model_name IS NOT NULL
  GROUP BY 1
),
names AS (
  SELECT DISTINCT model FROM (
    SELECT model FROM declared UNION ALL SELECT model FROM observed
  ) AS u
)
SELECT n.model,
       CASE WHEN d.model IS NULL THEN 'observed only'
            WHEN o.model IS NULL THEN 'declared only'
            ELSE 'declared and observed' END AS seen_as,
       coalesce(d.declared_trajectories, 0) AS declared_trajectories,
       coalesce(o.observed_trajectories, 0) AS observed_trajectories,
       coalesce(o.steps, 0) AS steps,
       o.prompt_tokens, o.completion_tokens, o.cost_usd
FROM names n
LEFT JOIN declared d ON n.model = d.model
LEFT JOIN observed o ON n.model = o.model
ORDER BY steps DESC, declared_trajectories DESC, n.model
";

/// One row per normalised function name (trimmed, lowercased).
const TOOLS: &str = "
SELECT lower(trim(function_name)) AS function,
       count(*) AS calls,
       count(DISTINCT source_path || '|' || storage_ordinal) AS trajectories,
       count(duration_ms) AS calls_with_duration,
       round(100.0 * count(duration_ms) / count(*), 1) AS duration_coverage_pct,
       round(avg(duration_ms), 1) AS avg_duration_ms,
       max(duration_ms) AS max_duration_ms,
       sum(CASE WHEN status IN ('error', 'failed') OR exit_code <> 0 THEN 1 ELSE 0 END) AS failures
FROM tool_calls
WHERE function_name IS NOT NULL
GROUP BY 1
ORDER BY calls DESC, function
";
