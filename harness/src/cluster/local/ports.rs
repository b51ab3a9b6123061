//! Ports for a local cluster's components: [`free_port`] hands out one, [`allocate_ports`] the
//! set a cluster needs, each below the kernel's ephemeral range, never twice by one process
//! and never by two harness processes at once ([`reserve`]).

use std::net::TcpListener;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::Path;
use std::sync::Mutex;

use super::LocalError;
use super::components::Ports;

/// A free port on 127.0.0.1 (released before returning; bind it soon).
pub fn free_port() -> Result<u16, LocalError> {
    // Ports are picked below the kernel's ephemeral range, so that no outgoing connection
    // (of this or any process) can take one between now and the component binding it, and
    // never handed out twice by this process (clusters of parallel cells start at once) nor
    // while another harness process holds it: a port is free to bind for seconds (until its
    // component starts, or while one restarts) and another process's pick would take it.
    static HANDED_OUT: Mutex<std::collections::BTreeSet<u16>> =
        Mutex::new(std::collections::BTreeSet::new());
    static EPHEMERAL_LOW: std::sync::OnceLock<u16> = std::sync::OnceLock::new();
    let ephemeral_low = *EPHEMERAL_LOW.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
            .unwrap_or(32768)
    });
    let (low, high) = (10000u16, ephemeral_low.saturating_sub(1));
    let mut handed = HANDED_OUT.lock().unwrap_or_else(|p| p.into_inner());
    if high > low {
        for _ in 0..500 {
            let p = rand::random_range(low..=high);
            if handed.contains(&p) {
                continue;
            }
            if TcpListener::bind(("127.0.0.1", p)).is_ok() && reserve(p) {
                handed.insert(p);
                return Ok(p);
            }
        }
    }
    let l = TcpListener::bind(("127.0.0.1", 0))
        .map_err(|e| LocalError::io(Path::new("127.0.0.1:0"), e))?;
    let p = l
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| LocalError::io(Path::new("127.0.0.1:0"), e))?;
    handed.insert(p);
    Ok(p)
}

/// Reserves `port` among this machine's harness processes for the rest of this process's life:
/// an abstract Unix socket named after it (`harness-port-<port>`), which no file backs and the
/// kernel releases when the process ends, however it ends. False when another process holds
/// it; true, reserving nothing, when the socket cannot be made for any other reason (a kernel
/// without abstract sockets, say): the port's own bind check still stands.
fn reserve(port: u16) -> bool {
    static HELD: Mutex<Vec<UnixDatagram>> = Mutex::new(Vec::new());
    let Ok(name) = SocketAddr::from_abstract_name(reservation(port)) else {
        return true;
    };
    match UnixDatagram::bind_addr(&name) {
        Ok(socket) => {
            HELD.lock().unwrap_or_else(|p| p.into_inner()).push(socket);
            true
        }
        Err(e) => e.kind() != std::io::ErrorKind::AddrInUse,
    }
}

/// The abstract socket name that reserves `port` ([`reserve`]).
fn reservation(port: u16) -> String {
    format!("harness-port-{port}")
}

pub(super) fn allocate_ports(apiserver: Option<u16>) -> Result<Ports, LocalError> {
    // Below the ephemeral range and never handed out twice (see `free_port`): a port the
    // kernel picked (bind to port 0) is in the ephemeral range, where any outgoing connection
    // can take it before the component binds it (a scheduler once failed so).
    let free = free_port;
    let apiserver = match apiserver {
        Some(p) => {
            TcpListener::bind(("127.0.0.1", p)).map_err(|_| LocalError::PortInUse {
                port: p,
                what: "kube-apiserver".into(),
            })?;
            p
        }
        None => free()?,
    };
    Ok(Ports {
        etcd_client: free()?,
        etcd_peer: free()?,
        apiserver,
        controller_manager: free()?,
        scheduler: free()?,
        kwok: free()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_another_harness_process_holds_is_not_handed_out() {
        // Another process's reservation, as it would hold it.
        let held = (20000..30000u16)
            .find_map(|p| {
                let name = SocketAddr::from_abstract_name(reservation(p)).unwrap();
                UnixDatagram::bind_addr(&name).ok().map(|s| (p, s))
            })
            .unwrap();
        assert!(!reserve(held.0), "{} is held elsewhere", held.0);
        // A port this process reserves is held against every other.
        let mine = free_port().unwrap();
        let name = SocketAddr::from_abstract_name(reservation(mine)).unwrap();
        let e = UnixDatagram::bind_addr(&name).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "{mine}: {e}");
    }

    #[test]
    fn component_ports_are_distinct_and_below_the_ephemeral_range() {
        let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
            .unwrap_or(32768);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..20 {
            let p = allocate_ports(None).unwrap();
            for port in [
                p.etcd_client,
                p.etcd_peer,
                p.apiserver,
                p.controller_manager,
                p.scheduler,
                p.kwok,
            ] {
                assert!(port < low, "{port} is in the ephemeral range from {low}");
                assert!(seen.insert(port), "{port} handed out twice");
            }
        }
    }
}
