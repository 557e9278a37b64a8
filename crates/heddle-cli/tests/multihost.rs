//! Workers on different hosts: two network namespaces joined by a bridge stand in for two
//! machines. Each worker runs in its own namespace with its own host id, so every link is
//! TCP across the (virtual) network, and the job master listens on the bridge address.
//! Needs root and iproute2 (as on this project's machines and CI); elsewhere the test says
//! why it cannot run and passes without checking anything.

use std::path::PathBuf;
use std::process::{Command, Stdio};

struct Net {
    tag: String,
}

fn sh(cmd: &str) -> Result<(), String> {
    let out = Command::new("sh")
        .args(["-c", cmd])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("`{cmd}`: {}", String::from_utf8_lossy(&out.stderr)))
    }
}

impl Net {
    /// Bridge `hb<tag>` at 10.213.<n>.254 in this namespace; namespaces `hd<tag>a` and
    /// `hd<tag>b` at .1 and .2.
    fn create(subnet: u8) -> Result<Net, String> {
        let tag = format!("{}", std::process::id() % 100_000);
        let net = Net { tag: tag.clone() };
        let pfx = format!("10.213.{subnet}");
        sh(&format!(
            "ip link add hb{tag} type bridge && ip addr add {pfx}.254/24 dev hb{tag} \
             && ip link set hb{tag} up"
        ))?;
        for (side, host) in [("a", 1), ("b", 2)] {
            let ns = format!("hd{tag}{side}");
            sh(&format!(
                "ip netns add {ns} \
                 && ip link add hv{tag}{side} type veth peer name eth0 netns {ns} \
                 && ip link set hv{tag}{side} master hb{tag} && ip link set hv{tag}{side} up \
                 && ip -n {ns} addr add {pfx}.{host}/24 dev eth0 && ip -n {ns} link set eth0 up \
                 && ip -n {ns} link set lo up"
            ))?;
        }
        Ok(net)
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        let t = &self.tag;
        let _ = sh(&format!("ip netns del hd{t}a; ip netns del hd{t}b; ip link del hb{t}"));
    }
}

fn example(name: &str) -> String {
    let heddle = PathBuf::from(env!("CARGO_BIN_EXE_heddle"));
    let p = heddle.parent().expect("target dir").join("examples").join(name);
    assert!(p.exists(), "{} is missing: build the examples first (make test)", p.display());
    p.display().to_string()
}

#[test]
fn collectives_across_two_hosts_over_tcp() {
    let subnet = (std::process::id() % 200) as u8 + 20;
    let net = match Net::create(subnet) {
        Ok(n) => n,
        Err(why) => {
            eprintln!("cannot create network namespaces here, not testing across hosts: {why}");
            return;
        }
    };
    let demo = example("collectives");
    // Ranks 0 and 2 on host a, rank 1 and 3 on host b: shm inside a host, TCP across.
    let script = format!(
        "if [ $((HEDDLE_RANK % 2)) = 0 ]; then h=a; else h=b; fi; \
         HEDDLE_HOST_ID=host-$h exec ip netns exec hd{t}$h {demo} --elements 50000",
        t = net.tag
    );
    let out = Command::new(env!("CARGO_BIN_EXE_heddle"))
        .args([
            "run",
            "-n",
            "4",
            "--init-timeout",
            "20",
            "--master-bind",
            &format!("10.213.{subnet}.254:0"),
            "--",
            "sh",
            "-c",
            &script,
        ])
        .output()
        .expect("run heddle");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let json = stdout.lines().find(|l| l.starts_with("[0] {\"example\"")).expect("summary line");
    assert!(json.contains("\"ok\": true"), "{json}");
    // Rank 0 shares host a with rank 2 only: ranks 1 and 3 are across the network.
    assert!(json.contains("\"tcp_peers\": 2"), "{json}");
}
