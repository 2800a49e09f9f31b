//! Small helpers shared by several layers: path normalisation, hashing, text
//! sanitising, redaction, the JSONPath. Nothing here knows about trajectories.

pub mod config;
pub mod failpoint;
pub mod fs;
pub mod hash;
pub mod interrupt;
pub mod json_follow;
pub mod jsonpath;
pub mod lru;
pub mod notes;
pub mod ordered;
pub mod path;
pub mod redact;
pub mod rt;
pub mod stats;
pub mod terminal;
pub mod text;
pub mod time;
