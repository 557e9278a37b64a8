//! The flags of `heddle bench collectives`, their checks, and the arguments both sides receive.

use std::path::PathBuf;

use super::record::COLLECTIVES;
use super::BoxError;

/// Default message sizes in bytes (8 B, 1 KiB, 64 KiB, 1 MiB, 16 MiB).
const DEFAULT_SIZES: &str = "8,1024,65536,1048576,16777216";

/// Transport forced on the Heddle side through `HEDDLE_TRANSPORT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum Transport {
    /// Let Heddle choose per peer pair (shared memory on one host).
    Auto,
    /// Shared memory rings.
    Shm,
    /// TCP sockets.
    Tcp,
}

impl Transport {
    /// The value of `HEDDLE_TRANSPORT` (and of `"transport"` in the JSON report).
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Transport::Auto => "auto",
            Transport::Shm => "shm",
            Transport::Tcp => "tcp",
        }
    }
}

/// `heddle bench collectives`: Heddle vs a peer system on the same collectives.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct BenchCollectivesArgs {
    /// Peer system to compare against (`mpi` = Open MPI through mpi4py; the only one for now).
    #[arg(long = "vs", value_name = "PEER", default_value = "mpi", value_parser = ["mpi"])]
    pub(super) vs: String,

    /// Also write every measurement (one record per collective, ranks, bytes and system) to FILE.
    #[arg(long, value_name = "FILE")]
    pub(super) json: Option<PathBuf>,

    /// World sizes to run, comma-separated.
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "2,4")]
    pub(super) ranks: Vec<usize>,

    /// Message sizes in bytes, comma-separated (pingpong is always 8 B, bandwidth 16 MiB).
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = DEFAULT_SIZES)]
    pub(super) sizes: Vec<u64>,

    /// Collectives to run, comma-separated
    /// (allreduce,iallreduce,scan,broadcast,allgather,alltoall,ring,pingpong,bandwidth).
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "allreduce,iallreduce,scan,broadcast,allgather,alltoall,ring,pingpong,bandwidth"
    )]
    pub(super) collectives: Vec<String>,

    /// Ten times fewer iterations: a smoke test, not a measurement.
    #[arg(long)]
    pub(super) quick: bool,

    /// Heddle transport, passed as HEDDLE_TRANSPORT [default: auto, i.e. not set].
    #[arg(long, value_enum, value_name = "TRANSPORT")]
    pub(super) transport: Option<Transport>,

    /// Time limit of each run (one system at one world size), in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 900)]
    pub(super) timeout: u64,

    /// Run each side N times, alternating Heddle and MPI, and keep for every measurement the
    /// run with the median p50 (the dev VM drifts between a fast and a slow state, by up to 2x,
    /// over tens of seconds; alternating repeats keep one system from getting only one state).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub(super) repeat: usize,
}

impl BenchCollectivesArgs {
    /// Rejects what clap lets through: another peer, an empty or zero world size, no sizes, an
    /// unknown collective.
    pub(super) fn validate(&self) -> Result<(), BoxError> {
        if self.vs != "mpi" {
            return Err(format!("--vs {}: unsupported peer (supported: mpi)", self.vs).into());
        }
        if self.ranks.is_empty() || self.ranks.contains(&0) {
            return Err("--ranks needs a list of world sizes >= 1, e.g. 2,4".into());
        }
        if self.sizes.is_empty() {
            return Err("--sizes needs at least one size in bytes".into());
        }
        if let Some(bad) = self.collectives.iter().find(|c| !COLLECTIVES.contains(&c.as_str())) {
            return Err(format!(
                "--collectives: unknown collective {bad:?} (known: {})",
                COLLECTIVES.join(",")
            )
            .into());
        }
        Ok(())
    }

    /// The arguments both benchmark programs take:
    /// `--sizes S,… --collectives C,… [--quick]`.
    pub(super) fn program_args(&self) -> Vec<String> {
        let sizes: Vec<String> = self.sizes.iter().map(u64::to_string).collect();
        let mut v = vec![
            "--sizes".to_string(),
            sizes.join(","),
            "--collectives".to_string(),
            self.collectives.join(","),
        ];
        if self.quick {
            v.push("--quick".to_string());
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_defaults_and_vs_check() {
        use clap::Parser;
        #[derive(Debug, clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: BenchCollectivesArgs,
        }
        let cli = Cli::try_parse_from(["x", "--vs", "mpi"]).expect("parses");
        assert_eq!(cli.args.ranks, vec![2, 4]);
        assert_eq!(cli.args.sizes, vec![8, 1024, 65536, 1048576, 16777216]);
        assert_eq!(cli.args.collectives.len(), COLLECTIVES.len());
        assert_eq!(cli.args.transport, None);
        assert_eq!(cli.args.repeat, 1);
        assert!(!cli.args.quick);
        let cli = Cli::try_parse_from([
            "x",
            "--vs",
            "mpi",
            "--ranks",
            "3",
            "--sizes",
            "8,64",
            "--transport",
            "tcp",
            "--quick",
            "--json",
            "out.json",
        ])
        .expect("parses");
        assert_eq!(cli.args.ranks, vec![3]);
        assert_eq!(cli.args.sizes, vec![8, 64]);
        assert_eq!(cli.args.transport, Some(Transport::Tcp));
        assert_eq!(cli.args.json, Some(PathBuf::from("out.json")));
        let err = Cli::try_parse_from(["x", "--vs", "spark"]).expect_err("only mpi");
        assert!(err.to_string().contains("mpi"), "{err}");
    }
}
