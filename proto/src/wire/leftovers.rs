//! Ranks the coordinator gave up (protocol 1.1): coordinator → agent
//! `ReapRanks`, agent → coordinator `RanksReaped`.
//!
//! A rank is given up when its job failed or was cancelled while the rank's
//! node could not be told (agent dead or unreachable), or when a restarted
//! agent no longer knows a rank it was running. Its processes may still run
//! on the node, unmanaged: the coordinator repeats the order after every
//! registration of that node until the agent acknowledges it.

use serde::{Deserialize, Serialize};

use super::jobs::JobId;
use super::kind::MessageKind;
use super::payload::Payload;

/// Rank `rank` of job `job_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RankRef {
    pub job_id: JobId,
    pub rank: u32,
}

impl std::fmt::Display for RankRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "job {} rank {}", self.job_id, self.rank)
    }
}

/// Kill whatever is left of these ranks on the receiving agent's node, whether
/// the agent knows them or not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReapRanks {
    pub ranks: Vec<RankRef>,
}

impl Payload for ReapRanks {
    const KIND: MessageKind = MessageKind::ReapRanks;

    fn check(&self) -> Result<(), String> {
        if self.ranks.is_empty() {
            return Err("no ranks to reap".into());
        }
        Ok(())
    }
}

/// One rank of a [`ReapRanks`] order, carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReapedRank {
    pub job_id: JobId,
    pub rank: u32,
    /// Processes of the rank that were found and killed (0: none was left).
    pub processes: u32,
}

impl ReapedRank {
    pub fn rank_ref(&self) -> RankRef {
        RankRef {
            job_id: self.job_id,
            rank: self.rank,
        }
    }
}

/// The agent carried out a [`ReapRanks`] order: the coordinator may forget
/// these ranks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RanksReaped {
    pub ranks: Vec<ReapedRank>,
}

impl Payload for RanksReaped {
    const KIND: MessageKind = MessageKind::RanksReaped;
}
