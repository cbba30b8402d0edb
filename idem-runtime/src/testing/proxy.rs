//! A TCP proxy that puts real network faults between a store client and
//! its server: cut every open connection, stall the bytes in flight,
//! black-hole them, or freeze the open connections silently while new ones
//! go through (half-open TCP). The client's own code (reconnects, timeouts, pools)
//! meets the fault exactly as it would in production.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the proxy does with the bytes it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Forward them (the default).
    Forward,
    /// Hold them until the flow changes: a slow or paused network. Nothing
    /// is lost; held bytes go on when the proxy forwards again.
    Stall,
    /// A partition: nothing gets through and nothing answers. As with a
    /// real one, the connections open meanwhile do not survive it: when
    /// the flow changes back they are closed (TCP never drops bytes from a
    /// stream that goes on).
    BlackHole,
}

struct Control {
    flow: watch::Sender<Flow>,
    /// Bumped to close every connection open at the time.
    cuts: watch::Sender<u64>,
    /// Bumped to freeze every connection open at the time.
    freezes: watch::Sender<u64>,
    accepted: AtomicUsize,
}

/// A TCP proxy on 127.0.0.1 in front of `upstream`; stops when dropped.
pub struct Proxy {
    addr: SocketAddr,
    control: Arc<Control>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("addr", &self.addr)
            .field("flow", &*self.control.flow.borrow())
            .finish_non_exhaustive()
    }
}

impl Proxy {
    /// Starts a proxy to `upstream` on a free loopback port.
    pub async fn start(upstream: SocketAddr) -> io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let control = Arc::new(Control {
            flow: watch::channel(Flow::Forward).0,
            cuts: watch::channel(0).0,
            freezes: watch::channel(0).0,
            accepted: AtomicUsize::new(0),
        });
        let task = tokio::spawn(accept(listener, upstream, control.clone()));
        Ok(Proxy {
            addr,
            control,
            task,
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Closes every connection open now, in both directions; new ones are
    /// accepted as before.
    pub fn cut(&self) {
        self.control.cuts.send_modify(|n| *n += 1);
    }

    /// Freezes every connection open now, silently and for good: the
    /// client's end is neither closed nor answered, and what it sends is
    /// swallowed (the server's end is closed: the server's sessions go, as
    /// after a failover), while connections opened later are forwarded as
    /// usual.
    /// This is the half-open TCP that a failover behind a virtual IP, a NAT
    /// or firewall that dropped its state, or a vanished peer host leaves
    /// behind: a client that trusts its open socket waits forever, one that
    /// opens a new connection is served at once. [`cut`](Self::cut) closes
    /// frozen connections too.
    pub fn freeze(&self) {
        self.control.freezes.send_modify(|n| *n += 1);
    }

    /// Sets what happens to the bytes from now on.
    pub fn set(&self, flow: Flow) {
        self.control.flow.send_replace(flow);
    }

    /// PayloadKind the bytes until [`forward`](Self::forward).
    pub fn stall(&self) {
        self.set(Flow::Stall);
    }

    /// Lets nothing through until [`forward`](Self::forward), which then
    /// closes the connections that were open meanwhile.
    pub fn black_hole(&self) {
        self.set(Flow::BlackHole);
    }

    /// Forwards the bytes again: held ones first after a stall; after a
    /// black hole, on new connections only.
    pub fn forward(&self) {
        self.set(Flow::Forward);
    }

    /// How many connections the proxy has accepted.
    pub fn accepted(&self) -> usize {
        self.control.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
        self.task.abort();
    }
}

async fn accept(listener: TcpListener, upstream: SocketAddr, control: Arc<Control>) {
    while let Ok((client, _)) = listener.accept().await {
        control.accepted.fetch_add(1, Ordering::SeqCst);
        let control = control.clone();
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(upstream).await else {
                return; // Dropping the client closes it: refused.
            };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            relay(client, server, &control).await;
        });
    }
}

/// Pumps both directions until either side closes or the connection is
/// cut; dropping the streams then closes both.
async fn relay(client: TcpStream, server: TcpStream, control: &Control) {
    let mut cuts = control.cuts.subscribe();
    cuts.mark_unchanged();
    let mut freezes = control.freezes.subscribe();
    freezes.mark_unchanged();
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let up = pump(&mut client_read, &mut server_write, control);
    let down = pump(&mut server_read, &mut client_write, control);
    let frozen = tokio::select! {
        _ = up => false,
        _ = down => false,
        _ = cuts.changed() => false,
        _ = outlived_black_hole(control.flow.subscribe()) => false,
        _ = freezes.changed() => true,
    };
    if frozen {
        // The client's end stays open (its write half is held until the
        // cut) and whatever it sends is dropped; the server's end closes,
        // as the server behind a failover is another one: a frozen
        // connection must not hold a server's sessions (PostgreSQL's
        // `max_connections`) for as long as the proxy runs, which no real
        // server would let it (its keepalives would find the peer gone,
        // where here the proxy answers them).
        drop((server_read, server_write));
        tokio::select! {
            _ = swallow(&mut client_read) => {}
            _ = cuts.changed() => {}
        }
        drop(client_write);
    }
}

/// Reads and drops everything `from` sends; never resolves: a peer that
/// closes its end is not told to the other (it too sees nothing).
async fn swallow(from: &mut (impl AsyncReadExt + Unpin)) {
    let mut buf = vec![0u8; 16 * 1024];
    while let Ok(n) = from.read(&mut buf).await {
        if n == 0 {
            break;
        }
    }
    std::future::pending::<()>().await
}

/// Resolves when a black hole this connection was open during ends.
async fn outlived_black_hole(mut flow: watch::Receiver<Flow>) {
    let holed = flow.wait_for(|f| *f == Flow::BlackHole).await.is_ok()
        && flow.wait_for(|f| *f != Flow::BlackHole).await.is_ok();
    if !holed {
        std::future::pending::<()>().await;
    }
}

/// Copies `from` to `to` as the flow says, until `from` closes or a write
/// fails.
async fn pump(
    from: &mut (impl AsyncReadExt + Unpin),
    to: &mut (impl AsyncWriteExt + Unpin),
    control: &Control,
) {
    let mut flow = control.flow.subscribe();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        // Hold the bytes read so far while nothing flows; bytes held in a
        // black hole never arrive: the connection ends with it.
        let mut holed = false;
        let forward = flow.wait_for(|f| {
            holed |= *f == Flow::BlackHole;
            *f == Flow::Forward
        });
        if forward.await.is_err() || holed {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
