//! How long a networked store's socket may go unanswered before the kernel
//! closes it: TCP keepalive probes on an idle connection, and
//! `TCP_USER_TIMEOUT` (Linux) on one with bytes unacknowledged. Without
//! them a connection whose peer vanished (a failover behind a virtual IP,
//! a NAT or firewall that dropped its state) looks open for as long as the
//! kernel's defaults say: two hours idle, some fifteen minutes with data
//! in flight. The stores also retire a connection that leaves a command
//! unanswered (their own timeouts, or the registry's); these bound what
//! nothing is sent on.

use std::time::Duration;

/// Idle time before the first keepalive probe.
pub(crate) const IDLE: Duration = Duration::from_secs(5);
/// Time between two probes.
pub(crate) const INTERVAL: Duration = Duration::from_secs(1);
/// Probes unanswered before the connection is closed: an idle dead
/// connection is closed within `IDLE + PROBES × INTERVAL`, 8 s.
#[cfg_attr(
    not(any(target_os = "linux", target_os = "android", target_os = "fuchsia")),
    allow(dead_code)
)]
pub(crate) const PROBES: u32 = 3;
/// How long sent bytes may stay unacknowledged before the connection is
/// closed (`TCP_USER_TIMEOUT`, Linux).
#[cfg_attr(
    not(any(target_os = "linux", target_os = "android", target_os = "fuchsia")),
    allow(dead_code)
)]
pub(crate) const USER_TIMEOUT: Duration = Duration::from_secs(10);
