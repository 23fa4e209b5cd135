//! What the MPI programs report: our benchmarks' `MPIBENCH {json}` line
//! (rank 0, stdout) and HPCC's summary (`hpccoutf.txt`).
use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};

/// The prefix of our benchmarks' result line.
pub const RESULT_PREFIX: &str = "MPIBENCH ";

/// One run of one of our benchmarks, as rank 0 printed it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchResult {
    pub prog: String,
    pub ranks: u32,
    pub iters: u64,
    pub size: u64,
    pub compute_us: f64,
    /// The slowest rank's time for the timed iterations.
    pub elapsed_s: f64,
    pub us_per_iter: f64,
    /// How late the latest rank reached the common start instant (0: all
    /// were waiting for it).
    pub late_start_s: f64,
}

/// The result line in a program's stdout.
pub fn bench_result(stdout: &str) -> Result<BenchResult> {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix(RESULT_PREFIX))
        .context("no MPIBENCH line in the job's output")?;
    serde_json::from_str(line).with_context(|| format!("bad MPIBENCH line {line:?}"))
}

/// HPCC's timed kernels: the sum of the `*_time*` values of the summary in
/// `hpccoutf.txt` (HPL, PTRANS, MPIRandomAccess, MPIFFT), seconds.
pub fn hpcc_kernel_seconds(hpccoutf: &str) -> Result<f64> {
    let summary = hpccoutf
        .split_once("Begin of Summary section.")
        .context("hpccoutf.txt has no summary (did HPCC finish?)")?
        .1;
    let times: Vec<f64> = summary
        .lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| k.contains("_time"))
        .filter_map(|(_, v)| v.trim().parse().ok())
        .collect();
    if times.is_empty() {
        anyhow::bail!("hpccoutf.txt's summary has no *_time values");
    }
    Ok(times.iter().sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_result_line_among_other_output() {
        let out = "warning: x\nMPIBENCH {\"prog\":\"pingpong\",\"lib\":\"openmpi\",\"ranks\":2,\"iters\":20000,\"size\":8,\"compute_us\":20,\"elapsed_s\":2.149852,\"us_per_iter\":107.493,\"late_start_s\":0.000000}\n";
        let r = bench_result(out).unwrap();
        assert_eq!((r.prog.as_str(), r.ranks, r.iters), ("pingpong", 2, 20000));
        assert_eq!(r.elapsed_s, 2.149852);
        assert!(bench_result("nothing\n").is_err());
        assert!(bench_result("MPIBENCH {oops\n").is_err());
    }

    #[test]
    fn sums_hpcc_kernel_times() {
        let text = "HPL_time=9\nBegin of Summary section.\nVersionMajor=1\nHPL_time=0.5\nPTRANS_time=0.25\nMPIFFT_time0=0.125\nHPL_Tflops=3\n";
        assert_eq!(hpcc_kernel_seconds(text).unwrap(), 0.875);
        assert!(hpcc_kernel_seconds("HPL_time=1\n").is_err());
    }
}
