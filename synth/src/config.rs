//! The validated run configuration built from the command line.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use cosched_proto::class::RtParams;
use thiserror::Error;

use crate::cli::Cli;
use crate::header::HEADER_LEN;
use crate::modes::{Proto, RecvMode, WaitMode};
use crate::pattern::Pattern;

/// Largest UDP payload over IPv4; bigger frames cannot be one datagram.
pub const MAX_UDP_MSG_BYTES: usize = 65_507;
/// Upper bound for TCP frames, to keep a typo from allocating gigabytes.
pub const MAX_TCP_MSG_BYTES: usize = 64 << 20;
/// Measured seconds when neither `--duration` nor `--iterations` is given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(5);

/// How long the measured part runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RunLength {
    Iterations(u64),
    Duration(Duration),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub rank: usize,
    pub size: usize,
    pub peers: Vec<SocketAddr>,
    pub job: String,
    pub proto: Proto,
    pub pattern: Pattern,
    pub recv: RecvMode,
    pub wait: WaitMode,
    pub compute: Duration,
    pub io: Duration,
    pub io_every: u64,
    pub msg_bytes: usize,
    pub length: RunLength,
    pub start_at_unix_ns: Option<u64>,
    pub timeout: Duration,
    pub out: Option<PathBuf>,
    /// `--rt`: the pipeline pattern, frames paced and counted.
    pub rt: Option<RtMode>,
}

/// The validated `--rt` parameters (d, b, τ) and the window Γ = b·d.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtMode {
    pub period_ns: u64,
    pub frames: u32,
    pub work_ns: u64,
    pub window_ns: u64,
}

impl RtMode {
    /// Work above the period is allowed: an overloaded pipeline is a
    /// legitimate experiment (it must miss).
    pub fn new(params: RtParams) -> Result<Self, ConfigError> {
        if params.frames == 0 {
            return Err(ConfigError::RtNoFrames);
        }
        let window_ns = params
            .period_ns
            .checked_mul(u64::from(params.frames))
            .ok_or(ConfigError::RtWindowOverflow)?;
        Ok(RtMode {
            period_ns: params.period_ns,
            frames: params.frames,
            work_ns: params.work_ns,
            window_ns,
        })
    }
}

#[derive(Debug, Error, PartialEq)]
pub enum ConfigError {
    #[error("--size must be at least 1")]
    EmptyJob,
    #[error("--rank {rank} is out of range for --size {size}")]
    RankOutOfRange { rank: usize, size: usize },
    #[error("--peers lists {got} addresses but --size is {size}: give one per rank")]
    PeerCount { got: usize, size: usize },
    #[error("peer address {addr:?}: {reason}")]
    BadPeer { addr: String, reason: String },
    #[error("peer address {addr} is given for both rank {first} and rank {second}")]
    DuplicatePeer {
        addr: SocketAddr,
        first: usize,
        second: usize,
    },
    #[error("--msg-bytes {got} is below the {HEADER_LEN}-byte header")]
    MessageTooSmall { got: usize },
    #[error("--msg-bytes {got} exceeds the {max}-byte limit of {proto}")]
    MessageTooLarge {
        got: usize,
        max: usize,
        proto: &'static str,
    },
    #[error("--io-every must be at least 1")]
    IoEveryZero,
    #[error("--iterations must be at least 1")]
    NoIterations,
    #[error("--{flag} must be a positive number of seconds, got {got}")]
    BadSeconds { flag: &'static str, got: f64 },
    #[error("--rt needs at least 1 frame per window")]
    RtNoFrames,
    #[error("--rt: frames × period overflows 64-bit nanoseconds")]
    RtWindowOverflow,
}

impl Config {
    pub fn from_cli(cli: &Cli) -> Result<Self, ConfigError> {
        if cli.size == 0 {
            return Err(ConfigError::EmptyJob);
        }
        if cli.rank >= cli.size {
            return Err(ConfigError::RankOutOfRange {
                rank: cli.rank,
                size: cli.size,
            });
        }
        if cli.peers.len() != cli.size {
            return Err(ConfigError::PeerCount {
                got: cli.peers.len(),
                size: cli.size,
            });
        }
        let peers = cli
            .peers
            .iter()
            .map(|addr| resolve_peer(addr))
            .collect::<Result<Vec<_>, _>>()?;
        check_distinct(&peers)?;
        check_msg_bytes(cli.msg_bytes, cli.proto)?;
        if cli.io_every == 0 {
            return Err(ConfigError::IoEveryZero);
        }
        let length = match (cli.iterations, cli.duration) {
            (Some(0), _) => return Err(ConfigError::NoIterations),
            (Some(n), _) => RunLength::Iterations(n),
            (None, Some(secs)) => RunLength::Duration(seconds("duration", secs)?),
            (None, None) => RunLength::Duration(DEFAULT_DURATION),
        };
        let rt = cli.rt.map(RtMode::new).transpose()?;
        let (pattern, compute) = match rt {
            Some(rt) => (Pattern::Pipeline, Duration::from_nanos(rt.work_ns)),
            None => (cli.pattern, Duration::from_micros(cli.compute_us)),
        };
        Ok(Config {
            rank: cli.rank,
            size: cli.size,
            peers,
            job: cli.job.clone(),
            proto: cli.proto,
            pattern,
            recv: cli.recv,
            wait: cli.wait,
            compute,
            io: Duration::from_micros(cli.io_us),
            io_every: cli.io_every,
            msg_bytes: cli.msg_bytes,
            length,
            start_at_unix_ns: cli.start_at_unix_ns,
            timeout: seconds("timeout", cli.timeout)?,
            out: cli.out.clone(),
            rt,
        })
    }

    /// Whether iteration `iteration` includes the I/O step.
    pub fn does_io(&self, iteration: u64) -> bool {
        !self.io.is_zero() && iteration.is_multiple_of(self.io_every)
    }
}

/// Accepts `ip:port` directly and resolves `host:port` (first address wins),
/// so namespace setups can name nodes in /etc/hosts.
pub fn resolve_peer(addr: &str) -> Result<SocketAddr, ConfigError> {
    let bad = |reason: String| ConfigError::BadPeer {
        addr: addr.to_owned(),
        reason,
    };
    if let Ok(parsed) = addr.parse() {
        return Ok(parsed);
    }
    addr.to_socket_addrs()
        .map_err(|err| bad(err.to_string()))?
        .next()
        .ok_or_else(|| bad("resolves to no address".to_owned()))
}

fn check_distinct(peers: &[SocketAddr]) -> Result<(), ConfigError> {
    for (second, addr) in peers.iter().enumerate() {
        if let Some(first) = peers[..second].iter().position(|a| a == addr) {
            return Err(ConfigError::DuplicatePeer {
                addr: *addr,
                first,
                second,
            });
        }
    }
    Ok(())
}

fn check_msg_bytes(got: usize, proto: Proto) -> Result<(), ConfigError> {
    if got < HEADER_LEN {
        return Err(ConfigError::MessageTooSmall { got });
    }
    let max = match proto {
        Proto::Udp => MAX_UDP_MSG_BYTES,
        Proto::Tcp => MAX_TCP_MSG_BYTES,
    };
    if got > max {
        return Err(ConfigError::MessageTooLarge {
            got,
            max,
            proto: proto.as_str(),
        });
    }
    Ok(())
}

fn seconds(flag: &'static str, got: f64) -> Result<Duration, ConfigError> {
    Duration::try_from_secs_f64(got)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or(ConfigError::BadSeconds { flag, got })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn cli(extra: &[&str]) -> Cli {
        let base = [
            "cosched-synth",
            "--rank",
            "0",
            "--size",
            "2",
            "--peers",
            "127.0.0.1:7000,127.0.0.1:7001",
        ];
        Cli::try_parse_from(base.iter().chain(extra)).unwrap()
    }

    fn config(extra: &[&str]) -> Result<Config, ConfigError> {
        Config::from_cli(&cli(extra))
    }

    #[test]
    fn default_length_is_five_seconds() {
        assert_eq!(
            config(&[]).unwrap().length,
            RunLength::Duration(Duration::from_secs(5))
        );
        assert_eq!(
            config(&["--iterations", "7"]).unwrap().length,
            RunLength::Iterations(7)
        );
        assert_eq!(
            config(&["--duration", "0.25"]).unwrap().length,
            RunLength::Duration(Duration::from_millis(250))
        );
    }

    #[test]
    fn converts_units() {
        let config =
            config(&["--compute-us", "20", "--io-us", "1500", "--timeout", "2.5"]).unwrap();
        assert_eq!(config.compute, Duration::from_micros(20));
        assert_eq!(config.io, Duration::from_micros(1500));
        assert_eq!(config.timeout, Duration::from_millis(2500));
        assert_eq!(config.peers[1], "127.0.0.1:7001".parse().unwrap());
    }

    #[test]
    fn rejects_inconsistent_job_shapes() {
        let mut bad = cli(&[]);
        bad.rank = 2;
        assert_eq!(
            Config::from_cli(&bad),
            Err(ConfigError::RankOutOfRange { rank: 2, size: 2 })
        );
        bad.size = 3;
        assert_eq!(
            Config::from_cli(&bad),
            Err(ConfigError::PeerCount { got: 2, size: 3 })
        );
        bad.size = 0;
        assert_eq!(Config::from_cli(&bad), Err(ConfigError::EmptyJob));
        let mut dup = cli(&[]);
        dup.peers[1] = dup.peers[0].clone();
        assert!(matches!(
            Config::from_cli(&dup),
            Err(ConfigError::DuplicatePeer {
                first: 0,
                second: 1,
                ..
            })
        ));
    }

    #[test]
    fn rejects_bad_peer_addresses() {
        let mut bad = cli(&[]);
        bad.peers[1] = "no-port-here".into();
        assert!(matches!(
            Config::from_cli(&bad),
            Err(ConfigError::BadPeer { .. })
        ));
    }

    #[test]
    fn resolves_host_names() {
        assert_eq!(
            resolve_peer("localhost:9").unwrap().port(),
            9,
            "localhost must resolve"
        );
    }

    #[test]
    fn enforces_message_size_limits() {
        assert_eq!(
            config(&["--msg-bytes", "39"]),
            Err(ConfigError::MessageTooSmall { got: 39 })
        );
        assert!(config(&["--msg-bytes", "40"]).is_ok());
        assert!(matches!(
            config(&["--msg-bytes", "65508"]),
            Err(ConfigError::MessageTooLarge { max: 65_507, .. })
        ));
        assert!(config(&["--msg-bytes", "65508", "--proto", "tcp"]).is_ok());
    }

    #[test]
    fn rejects_zero_and_negative_amounts() {
        assert_eq!(
            config(&["--iterations", "0"]),
            Err(ConfigError::NoIterations)
        );
        assert_eq!(config(&["--io-every", "0"]), Err(ConfigError::IoEveryZero));
        assert!(matches!(
            config(&["--duration", "0"]),
            Err(ConfigError::BadSeconds {
                flag: "duration",
                ..
            })
        ));
        assert!(matches!(
            config(&["--timeout=-1"]),
            Err(ConfigError::BadSeconds {
                flag: "timeout",
                ..
            })
        ));
        assert!(matches!(
            config(&["--duration", "NaN"]),
            Err(ConfigError::BadSeconds { .. })
        ));
    }

    #[test]
    fn rt_mode_is_a_pipeline_computing_the_work_per_frame() {
        let config = config(&["--rt", "10000000:4:2500"]).unwrap();
        assert_eq!(config.pattern, Pattern::Pipeline);
        assert_eq!(config.compute, Duration::from_nanos(2_500));
        assert_eq!(
            config.rt,
            Some(RtMode {
                period_ns: 10_000_000,
                frames: 4,
                work_ns: 2_500,
                window_ns: 40_000_000
            })
        );
        assert_eq!(self::config(&[]).unwrap().rt, None);
        assert_eq!(
            self::config(&["--rt", "1000:0:1"]),
            Err(ConfigError::RtNoFrames)
        );
        assert_eq!(
            self::config(&["--rt", "9223372036854775807:3:1"]),
            Err(ConfigError::RtWindowOverflow)
        );
        assert!(
            self::config(&["--rt", "1000:1:5000"]).is_ok(),
            "overload is allowed"
        );
    }

    #[test]
    fn io_happens_every_k_iterations_only_when_enabled() {
        let every_third = config(&["--io-us", "10", "--io-every", "3"]).unwrap();
        let selected: Vec<u64> = (0..7).filter(|&i| every_third.does_io(i)).collect();
        assert_eq!(selected, vec![0, 3, 6]);
        let none = config(&["--io-every", "3"]).unwrap();
        assert!((0..7).all(|i| !none.does_io(i)));
    }
}
