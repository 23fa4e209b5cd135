//! What the policy benches share: their own copy of the binaries, a
//! cluster of their own
//! (refusing to take over a cluster that is up: it may be someone else's;
//! removing what a crashed run left behind; always torn down, also after
//! errors and Ctrl-C, which meanwhile only sets the flag the benches check
//! between runs, see [`interrupt`]), and writing the rows and the chart.
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

use super::local::interrupt;
use crate::{
    cargo_build::{self, Profile},
    cluster::{self, Cluster, UpOptions},
    progress::say,
    setup,
    workspace::Workspace,
};

/// Copies of the release binaries a bench runs, in a directory of its own
/// (removed on drop): a build during the bench replaces files in
/// target/release (a relink even removes them for a moment), which must
/// change nothing under a measurement that lasts minutes.
#[derive(Debug)]
pub struct BenchBinaries {
    dir: PathBuf,
}

impl BenchBinaries {
    /// Builds first when `build` is set; fails naming the first of
    /// `binaries` missing from target/release.
    pub fn snapshot(workspace: &Workspace, build: bool, binaries: &[&str]) -> anyhow::Result<Self> {
        if build {
            let tools = setup::all(workspace)?;
            cargo_build::build_binaries(workspace, &tools, Profile::Release)?;
        }
        let release = workspace.profile_dir("release")?;
        let dir = std::env::temp_dir().join(format!("cosched-bench-bin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let snapshot = Self { dir };
        for name in binaries {
            let path = release.join(name);
            if !path.is_file() {
                bail!("{} is missing: build it (drop --no-build)", path.display());
            }
            std::fs::copy(&path, snapshot.path(name))
                .with_context(|| format!("copying {}", path.display()))?;
        }
        Ok(snapshot)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for BenchBinaries {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs `bench` on a fresh cluster started with `options`.
pub fn with_own_cluster<T>(
    workspace: &Workspace,
    options: &UpOptions,
    bench: impl FnOnce(&mut Cluster) -> T,
) -> anyhow::Result<T> {
    if Cluster::try_load()?.is_some() {
        bail!(
            "a cluster is already up ({}): the bench needs its own; stop it with `cargo xtask cluster down`",
            Cluster::manifest_path().display()
        );
    }
    if !cluster::down()?.nothing_done() {
        say("bench", "removed leftovers of an earlier cluster");
    }
    // From here to the teardown, Ctrl-C only stops the bench between runs.
    let _interrupt = interrupt::catch()?;
    let up = cluster::up(workspace, options);
    let measured = up.map(|mut c| {
        let measured = bench(&mut c);
        keep_logs_if_asked(&c);
        measured
    });
    let down = cluster::down();
    let measured = measured?;
    if let Err(e) = down {
        // The numbers are good; losing them to a cleanup hiccup helps nobody.
        say(
            "bench",
            format!(
                "warning: tearing the bench cluster down: {e:#} (run `cargo xtask cluster down`)"
            ),
        );
    }
    Ok(measured)
}

/// With `COSCHED_BENCH_KEEP_LOGS=DIR`, the daemons' logs are copied there
/// before the teardown removes them (`RUST_LOG` reaches the daemons).
fn keep_logs_if_asked(cluster: &Cluster) {
    let Some(dir) = std::env::var_os("COSCHED_BENCH_KEEP_LOGS") else {
        return;
    };
    let dir = Path::new(&dir);
    let logs = cluster
        .nodes
        .iter()
        .map(|n| (n.name.clone(), &n.log_file))
        .chain(
            cluster
                .coordinator
                .iter()
                .map(|c| ("coordinator".into(), &c.log_file)),
        );
    let copied = std::fs::create_dir_all(dir).and_then(|()| {
        for (name, log) in logs {
            std::fs::copy(log, dir.join(format!("{name}.log")))?;
        }
        Ok(())
    });
    match copied {
        Ok(()) => say(
            "bench",
            format!("kept the daemons' logs in {}", dir.display()),
        ),
        Err(e) => say(
            "bench",
            format!("could not keep the logs in {}: {e}", dir.display()),
        ),
    }
}

/// Writes the rows as JSON to `json` and the chart `svg()` to `svg`, each
/// when asked for.
pub fn write_outputs<R: serde::Serialize>(
    json: Option<&Path>,
    svg: Option<&Path>,
    rows: &[R],
    chart: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    if let Some(path) = json {
        std::fs::write(path, serde_json::to_string_pretty(rows)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
        say("bench", format!("wrote {}", path.display()));
    }
    if let Some(path) = svg {
        std::fs::write(path, chart()).with_context(|| format!("writing {}", path.display()))?;
        say("bench", format!("wrote {}", path.display()));
    }
    Ok(())
}

/// A number a bench's JSON holds as `null` (serde_json writes NaN so) reads
/// back as NaN: for reading earlier reports (`--merge`, `mpi-pool`).
pub fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    use serde::Deserialize as _;
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// A list of numbers with `null`s for NaN, read back (see [`nan_if_null`]).
pub fn nans_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    use serde::Deserialize as _;
    Ok(Vec::<Option<f64>>::deserialize(d)?
        .into_iter()
        .map(|x| x.unwrap_or(f64::NAN))
        .collect())
}
