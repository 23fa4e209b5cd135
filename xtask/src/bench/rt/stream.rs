//! The arrival stream of `bench rt` (pure): Poisson arrivals of RT and BE
//! jobs in a given proportion, from a fixed seed so every column sees the
//! same stream. The draws do not depend on the rate: at another rate the
//! same sequence of jobs arrives with its gaps scaled by 1/λ (common random
//! numbers, so the curves differ by the load, not by luck).
//!
//! Which arrivals are RT is stratified rather than drawn one by one: with
//! p = x/(x+y), arrival i is RT when ⌊(i+1)·p + φ⌋ > ⌊i·p + φ⌋ for a phase
//! φ drawn from the seed, so any n consecutive arrivals hold n·p ± 1 RT
//! jobs. A cell has only tens of arrivals; independent draws would leave a
//! 1:9 cell without a single RT job about one time in ten.

/// RT : BE proportion of arrivals (the paper's 2:1, 9:1, 1:9).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Mix {
    pub rt: u32,
    pub be: u32,
}

impl Mix {
    pub const DEFAULT: [Mix; 3] = [
        Mix { rt: 2, be: 1 },
        Mix { rt: 9, be: 1 },
        Mix { rt: 1, be: 9 },
    ];

    pub fn label(self) -> String {
        format!("{}:{}", self.rt, self.be)
    }

    /// Parses `x:y` (both ≥ 0, not both 0).
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let (rt, be) = text
            .split_once(':')
            .ok_or_else(|| anyhow::anyhow!("mix {text:?}: expected RT:BE, e.g. 9:1"))?;
        let mix = Mix {
            rt: rt.trim().parse()?,
            be: be.trim().parse()?,
        };
        if mix.rt + mix.be == 0 {
            anyhow::bail!("mix {text:?}: at least one class must arrive");
        }
        Ok(mix)
    }

    fn rt_fraction(self) -> f64 {
        f64::from(self.rt) / f64::from(self.rt + self.be)
    }
}

/// What an arriving job is.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "class", rename_all = "lowercase")]
pub enum Kind {
    /// Real time: the work per frame it really does (it declares the
    /// workload's worst case).
    Rt {
        work_ns: u64,
    },
    Be,
}

/// One arrival.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Arrival {
    /// Position in the stream (0-based).
    pub index: usize,
    /// Seconds after the cell's start.
    pub at_s: f64,
    pub kind: Kind,
}

/// SplitMix64: small, fast, and enough for a reproducible stream.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The RT work range: each RT job does a work per frame uniform in
/// [`min_ns`, `max_ns`] (it declares `max_ns`, its worst case).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkRange {
    pub min_ns: u64,
    pub max_ns: u64,
}

/// The arrivals in [0, `window_s`) at `rate_per_s` jobs per second.
pub fn arrivals(
    seed: u64,
    mix: Mix,
    rate_per_s: f64,
    window_s: f64,
    work: WorkRange,
) -> Vec<Arrival> {
    let mut rng = Rng::new(seed);
    let phase = rng.unit();
    let p = mix.rt_fraction();
    let mut out = Vec::new();
    let mut t = 0.0;
    loop {
        // Two draws per arrival whatever its class, so the gaps do not
        // depend on the mix.
        let gap = -(1.0 - rng.unit()).ln() / rate_per_s;
        let work_draw = rng.unit();
        t += gap;
        if t >= window_s {
            return out;
        }
        let i = out.len() as f64;
        let rt = ((i + 1.0) * p + phase).floor() > (i * p + phase).floor();
        let kind = if rt {
            let span = work.max_ns.saturating_sub(work.min_ns) as f64;
            Kind::Rt {
                work_ns: work.min_ns + (work_draw * span).round() as u64,
            }
        } else {
            Kind::Be
        };
        out.push(Arrival {
            index: out.len(),
            at_s: t,
            kind,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORK: WorkRange = WorkRange {
        min_ns: 1_000_000,
        max_ns: 2_000_000,
    };

    #[test]
    fn the_same_seed_gives_every_column_the_same_stream() {
        let a = arrivals(7, Mix { rt: 2, be: 1 }, 2.0, 30.0, WORK);
        let b = arrivals(7, Mix { rt: 2, be: 1 }, 2.0, 30.0, WORK);
        assert_eq!(a, b);
        assert_ne!(a, arrivals(8, Mix { rt: 2, be: 1 }, 2.0, 30.0, WORK));
    }

    #[test]
    fn a_higher_rate_compresses_the_same_sequence() {
        let slow = arrivals(1, Mix { rt: 9, be: 1 }, 1.0, 1000.0, WORK);
        let fast = arrivals(1, Mix { rt: 9, be: 1 }, 4.0, 250.0, WORK);
        assert_eq!(slow.len(), fast.len());
        for (s, f) in slow.iter().zip(&fast) {
            assert_eq!(s.kind, f.kind);
            assert!((s.at_s / 4.0 - f.at_s).abs() < 1e-9);
        }
    }

    #[test]
    fn counts_and_proportions_follow_rate_and_mix_over_a_long_window() {
        let stream = arrivals(42, Mix { rt: 9, be: 1 }, 5.0, 2000.0, WORK);
        let n = stream.len() as f64;
        assert!(
            (n / 10_000.0 - 1.0).abs() < 0.05,
            "{n} arrivals for 10000 expected"
        );
        let rt = stream
            .iter()
            .filter(|a| matches!(a.kind, Kind::Rt { .. }))
            .count() as f64;
        assert!((rt / n - 0.9).abs() < 0.001, "RT fraction {}", rt / n);
        assert!(stream.windows(2).all(|w| w[0].at_s < w[1].at_s));
        assert!(stream.iter().all(|a| a.at_s < 2000.0));
    }

    #[test]
    fn even_a_short_stream_holds_its_mix() {
        for seed in 0..50 {
            for (mix, rate) in [(Mix { rt: 1, be: 9 }, 2.5), (Mix { rt: 9, be: 1 }, 1.0)] {
                let stream = arrivals(seed, mix, rate, 6.0, WORK);
                let n = stream.len() as f64;
                let rt = stream
                    .iter()
                    .filter(|a| matches!(a.kind, Kind::Rt { .. }))
                    .count() as f64;
                let expected = n * f64::from(mix.rt) / f64::from(mix.rt + mix.be);
                assert!((rt - expected).abs() <= 1.0, "seed {seed}: {rt} RT of {n}");
            }
        }
    }

    #[test]
    fn rt_work_stays_within_its_declared_worst_case() {
        let stream = arrivals(3, Mix { rt: 1, be: 0 }, 10.0, 100.0, WORK);
        assert!(stream.iter().all(|a| matches!(a.kind,
            Kind::Rt { work_ns } if (WORK.min_ns..=WORK.max_ns).contains(&work_ns))));
        let none_be = arrivals(3, Mix { rt: 0, be: 1 }, 10.0, 100.0, WORK);
        assert!(none_be.iter().all(|a| a.kind == Kind::Be));
    }

    #[test]
    fn mixes_parse_and_bad_ones_say_why() {
        assert_eq!(Mix::parse("9:1").unwrap(), Mix { rt: 9, be: 1 });
        assert_eq!(Mix { rt: 1, be: 9 }.label(), "1:9");
        assert!(Mix::parse("9").unwrap_err().to_string().contains("RT:BE"));
        assert!(Mix::parse("0:0").is_err());
    }
}
