//! Messages received with the kernel's receive stamps (`stamped`), over a
//! real loopback TCP connection.
#![cfg(feature = "tokio")]

#[path = "wire_support.rs"]
mod support;

use std::{
    io,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    task::{Context, Poll, ready},
    time::Duration,
};

use cosched_proto::wire::{
    Heartbeat, Message, monotonic_ns,
    stamped::{ReadTimes, StampedRead},
    stream::{self, Connection},
};
use support::{agent_config, coordinator_config};
use tokio::{
    io::AsyncWrite,
    net::{
        TcpListener, TcpStream,
        tcp::{OwnedReadHalf, OwnedWriteHalf},
    },
    time::{Sleep, sleep},
};

fn heartbeat(seq: u64) -> Message {
    Message::Heartbeat(Heartbeat { seq, t1_ns: 0 })
}

/// A writer that, when told to, writes only the first bytes of the next
/// write, then pauses before the rest (so the frame reaches the peer in two
/// parts), noting when it resumed.
struct Pausing {
    inner: OwnedWriteHalf,
    /// Bytes of the next write to send before pausing (0: no pause).
    split_at: Arc<AtomicUsize>,
    pause: Option<Pin<Box<Sleep>>>,
    resumed_ns: Arc<AtomicU64>,
}

impl AsyncWrite for Pausing {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if let Some(pause) = &mut this.pause {
            ready!(pause.as_mut().poll(cx));
            this.pause = None;
            this.resumed_ns.store(monotonic_ns(), Ordering::SeqCst);
        }
        let split_at = this.split_at.load(Ordering::SeqCst);
        if split_at > 0 {
            let head = &buf[..split_at.min(buf.len())];
            let written = ready!(Pin::new(&mut this.inner).poll_write(cx, head))?;
            this.split_at.store(0, Ordering::SeqCst);
            this.pause = Some(Box::pin(sleep(Duration::from_millis(30))));
            return Poll::Ready(Ok(written));
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

type Sender = Connection<OwnedReadHalf, Pausing>;
type Receiver = Connection<StampedRead, OwnedWriteHalf>;

/// An agent (sending through [`Pausing`]) and a coordinator reading with
/// kernel stamps, connected over loopback.
/// Also returns the writer's split point and when it resumed.
async fn connected() -> (Sender, Receiver, Arc<AtomicUsize>, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (client, accepted) = tokio::join!(TcpStream::connect(address), listener.accept());
    let (client_read, client_write) = client.unwrap().into_split();
    let (server_read, server_write) = accepted.unwrap().0.into_split();
    let resumed_ns = Arc::new(AtomicU64::new(0));
    let split_at = Arc::new(AtomicUsize::new(0));
    let writer = Pausing {
        inner: client_write,
        split_at: split_at.clone(),
        pause: None,
        resumed_ns: resumed_ns.clone(),
    };
    let (agent, coordinator) = tokio::join!(
        stream::initiate(client_read, writer, agent_config()),
        stream::accept(
            StampedRead::new(server_read),
            server_write,
            coordinator_config()
        ),
    );
    (agent.unwrap(), coordinator.unwrap(), split_at, resumed_ns)
}

#[tokio::test]
async fn a_message_read_late_carries_when_it_arrived_not_when_it_was_read() {
    let (mut agent, mut coordinator, ..) = connected().await;
    let before_send = monotonic_ns();
    agent.writer.send(&heartbeat(1)).await.unwrap();
    // The message waits in the socket, as behind a busy task.
    sleep(Duration::from_millis(50)).await;
    let before_read = monotonic_ns();
    let (message, arrived_ns) = coordinator.reader.recv_stamped().await.unwrap().unwrap();
    assert_eq!(message, heartbeat(1));
    assert!(arrived_ns >= before_send, "{arrived_ns} < {before_send}");
    assert!(arrived_ns < before_read, "{arrived_ns} >= {before_read}");
}

#[tokio::test]
async fn a_message_split_across_reads_carries_the_arrival_of_its_last_part() {
    let (mut agent, mut coordinator, split_at, resumed_ns) = connected().await;
    split_at.store(40, Ordering::SeqCst);
    let message = heartbeat(2);
    let (sent, received) = tokio::join!(
        agent.writer.send(&message),
        coordinator.reader.recv_stamped()
    );
    sent.unwrap();
    let (message, arrived_ns) = received.unwrap().unwrap();
    let resumed = resumed_ns.load(Ordering::SeqCst);
    assert_eq!(message, heartbeat(2));
    assert!(resumed > 0, "the frame was not split");
    assert!(arrived_ns >= resumed, "{arrived_ns} < {resumed}");
    assert!(arrived_ns <= monotonic_ns());
}

#[tokio::test]
async fn messages_that_arrive_together_carry_that_read_s_arrival() {
    let (mut agent, mut coordinator, ..) = connected().await;
    agent.writer.send(&heartbeat(3)).await.unwrap();
    agent.writer.send(&heartbeat(4)).await.unwrap();
    sleep(Duration::from_millis(50)).await;
    let before_read = monotonic_ns();
    let (first, first_ns) = coordinator.reader.recv_stamped().await.unwrap().unwrap();
    let (second, second_ns) = coordinator.reader.recv_stamped().await.unwrap().unwrap();
    assert_eq!((first, second), (heartbeat(3), heartbeat(4)));
    // Both were complete by the time the last of them arrived, before the
    // reads.
    assert!(first_ns <= second_ns);
    assert!(second_ns < before_read, "{second_ns} >= {before_read}");
}

#[tokio::test]
async fn a_stream_the_kernel_cannot_stamp_gives_the_read_time() {
    let (agent_end, coordinator_end) = tokio::io::duplex(4096);
    let (agent_read, agent_write) = tokio::io::split(agent_end);
    let (coordinator_read, coordinator_write) = tokio::io::split(coordinator_end);
    let (agent, coordinator) = tokio::join!(
        stream::initiate(agent_read, agent_write, agent_config()),
        stream::accept(
            ReadTimes::new(coordinator_read),
            coordinator_write,
            coordinator_config()
        ),
    );
    let (mut agent, mut coordinator) = (agent.unwrap(), coordinator.unwrap());
    agent.writer.send(&heartbeat(5)).await.unwrap();
    sleep(Duration::from_millis(20)).await;
    let before_read = monotonic_ns();
    let (message, arrived_ns) = coordinator.reader.recv_stamped().await.unwrap().unwrap();
    assert_eq!(message, heartbeat(5));
    assert!(arrived_ns >= before_read, "{arrived_ns} < {before_read}");
}
