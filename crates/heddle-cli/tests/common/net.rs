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

    /// `count` hosts, or `None` after saying loudly why they cannot be made here (the
    /// caller then checks nothing; CI runs as root, where they can).
    pub fn create_or_say_why(count: usize) -> Option<Hosts> {
        match Hosts::create(count) {
            Ok(h) => Some(h),
            Err(why) => {
                eprintln!("!!! NOT TESTED: cannot create network namespaces here: {why}");
                None
            }
        }
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

/// Counts the frames crossing a network interface and those that carry `needle`, as an
/// eavesdropper on the wire would see them (a raw `AF_PACKET` socket; needs root).
pub struct Sniffer {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<(usize, usize)>>,
}

impl Sniffer {
    /// Starts listening on `interface`.
    pub fn start(interface: &str, needle: &'static [u8]) -> Result<Sniffer, String> {
        let name = std::ffi::CString::new(interface).map_err(|e| e.to_string())?;
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain socket calls on a descriptor this function owns; the structures
        // passed live across each call.
        let fd = unsafe {
            let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(proto));
            if fd < 0 {
                return Err(format!("AF_PACKET socket: {}", std::io::Error::last_os_error()));
            }
            let mut addr: libc::sockaddr_ll = std::mem::zeroed();
            addr.sll_family = libc::AF_PACKET as u16;
            addr.sll_protocol = proto;
            addr.sll_ifindex = libc::if_nametoindex(name.as_ptr()) as i32;
            let bound = libc::bind(
                fd,
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            );
            // Promiscuous, as tcpdump: a bridge's own socket sees frames between its
            // ports only then.
            let mut mreq: libc::packet_mreq = std::mem::zeroed();
            mreq.mr_ifindex = addr.sll_ifindex;
            mreq.mr_type = libc::PACKET_MR_PROMISC as u16;
            let promisc = libc::setsockopt(
                fd,
                libc::SOL_PACKET,
                libc::PACKET_ADD_MEMBERSHIP,
                (&mreq as *const libc::packet_mreq).cast(),
                std::mem::size_of::<libc::packet_mreq>() as u32,
            );
            let tv = libc::timeval { tv_sec: 0, tv_usec: 100_000 };
            let timed = libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as u32,
            );
            if bound != 0 || timed != 0 || promisc != 0 {
                let e = std::io::Error::last_os_error();
                libc::close(fd);
                return Err(format!("binding to {interface}: {e}"));
            }
            fd
        };
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let (mut frames, mut hits) = (0, 0);
            let mut buf = vec![0u8; 1 << 18];
            while !flag.load(Ordering::SeqCst) {
                // SAFETY: the buffer is valid for its length.
                let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
                if n > 0 {
                    frames += 1;
                    hits +=
                        usize::from(buf[..n as usize].windows(needle.len()).any(|w| w == needle));
                }
            }
            // SAFETY: closing the descriptor opened above, once.
            unsafe { libc::close(fd) };
            (frames, hits)
        });
        Ok(Sniffer { stop, thread: Some(thread) })
    }

    /// Stops; returns how many frames passed and how many carried the needle.
    pub fn finish(mut self) -> (usize, usize) {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().map(|t| t.join().expect("sniffer thread")).unwrap_or_default()
    }
}
