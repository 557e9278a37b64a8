//! Hosts simulated with network namespaces: a bridge in this namespace at 10.213.S.254 and
//! one namespace per host at 10.213.S.1, .2, ... joined to it by veth pairs. Needs root and
//! iproute2, as on this project's machines and CI.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

static NEXT: AtomicU32 = AtomicU32::new(0);

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

/// Simulated hosts, removed on drop.
pub struct Hosts {
    /// Names are `hd<tag><letter>` (namespaces), `hb<tag>` (bridge), `hv<tag><letter>`.
    pub tag: String,
    /// The third byte of the addresses.
    pub subnet: u8,
    /// How many hosts.
    pub count: usize,
}

impl Hosts {
    /// `count` hosts (at most 26), or why they cannot be made here.
    pub fn create(count: usize) -> Result<Hosts, String> {
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let tag = format!("{}{n}", std::process::id() % 10_000);
        let subnet = ((std::process::id() * 7 + n * 31) % 200) as u8 + 20;
        let hosts = Hosts { tag: tag.clone(), subnet, count };
        sh(&format!(
            "ip link add hb{tag} type bridge && ip addr add {}/24 dev hb{tag} \
             && ip link set hb{tag} up",
            hosts.bridge_ip()
        ))?;
        for h in 0..count {
            let (ns, side) = (hosts.ns(h), hosts.letter(h));
            sh(&format!(
                "ip netns add {ns} \
                 && ip link add hv{tag}{side} type veth peer name eth0 netns {ns} \
                 && ip link set hv{tag}{side} master hb{tag} && ip link set hv{tag}{side} up \
                 && ip -n {ns} addr add {}/24 dev eth0 && ip -n {ns} link set eth0 up \
                 && ip -n {ns} link set lo up",
                hosts.ip(h)
            ))?;
        }
        Ok(hosts)
    }

    fn letter(&self, h: usize) -> char {
        (b'a' + h as u8) as char
    }

    /// The namespace of host `h`.
    pub fn ns(&self, h: usize) -> String {
        format!("hd{}{}", self.tag, self.letter(h))
    }

    /// The address of host `h`.
    pub fn ip(&self, h: usize) -> String {
        format!("10.213.{}.{}", self.subnet, h + 1)
    }

    /// The bridge's address (this namespace, where a launcher's master can listen).
    pub fn bridge_ip(&self) -> String {
        format!("10.213.{}.254", self.subnet)
    }

    /// Cuts (`false`) or restores (`true`) host `h`'s link.
    pub fn link(&self, h: usize, up: bool) {
        let state = if up { "up" } else { "down" };
        sh(&format!("ip link set hv{}{} {state}", self.tag, self.letter(h))).expect("ip link set");
    }

    /// A `sh -c` script running `program` for rank `$HEDDLE_RANK` on host `rank / per_host`,
    /// with that host's id.
    pub fn script(&self, per_host: usize, program: &str) -> String {
        let names: Vec<String> = (0..self.count).map(|h| self.ns(h)).collect();
        format!(
            "set -- {}; i=$((HEDDLE_RANK / {per_host} + 1)); eval ns=\\${{$i}}; \
             HEDDLE_HOST_ID=host-$i exec ip netns exec $ns {program}",
            names.join(" ")
        )
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for h in 0..self.count {
            let _ = sh(&format!("ip netns del {}", self.ns(h)));
        }
        let _ = sh(&format!("ip link del hb{}", self.tag));
    }
}
