//! `heddle bridge`: tools for bridged tasks in other languages.
//!
//! `heddle bridge conformance [--transports pipe,unix] -- CMD ARGS` runs the conformance
//! suite of `spec/bridge.md` §9 against an SDK's reference filter and exits 1 if any case
//! fails.

use heddle_bridge::{conformance, FilterCommand, Transport};

/// The `heddle bridge` subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum BridgeCmd {
    /// Run the bridge conformance suite against an SDK's reference filter.
    Conformance(ConformanceArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct ConformanceArgs {
    /// Transports to test, comma-separated (the SDK's language must allow each).
    #[arg(long, default_value = "pipe,fifo,tcp,unix,shm", value_delimiter = ',')]
    transports: Vec<String>,
    /// Print one JSON object per case instead of text.
    #[arg(long)]
    json: bool,
    /// The reference filter's command line.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

pub(crate) fn bridge(cmd: BridgeCmd) -> i32 {
    match cmd {
        BridgeCmd::Conformance(args) => conformance_cmd(&args),
    }
}

fn conformance_cmd(args: &ConformanceArgs) -> i32 {
    let transports: Result<Vec<Transport>, _> = args.transports.iter().map(|t| t.parse()).collect();
    let transports = match transports {
        Ok(t) if !t.is_empty() => t,
        Ok(_) => {
            eprintln!("heddle bridge conformance: --transports is empty");
            return 2;
        }
        Err(e) => {
            eprintln!("heddle bridge conformance: {e}");
            return 2;
        }
    };
    let cmd = FilterCommand::new(&args.command[0]).args(args.command[1..].iter().cloned());
    let cases = conformance::run(&cmd, &transports);
    for c in &cases {
        if args.json {
            let line = serde_json::json!({
                "case": c.name, "passed": c.passed, "detail": c.detail, "seconds": c.seconds,
            });
            println!("{line}");
        } else {
            let mark = if c.passed { "PASS" } else { "FAIL" };
            println!("{mark} {:<26} {:>6.2} s  {}", c.name, c.seconds, c.detail);
        }
    }
    let failed = cases.iter().filter(|c| !c.passed).count();
    if !args.json {
        println!("{} of {} cases passed for `{cmd}`", cases.len() - failed, cases.len());
    }
    i32::from(failed > 0)
}
