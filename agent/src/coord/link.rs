//! The connection to the coordinator, as a task of its own: connect,
//! handshake, register, then move messages between the socket and the
//! daemon's main loop, answer the coordinator's heartbeats (timestamps taken
//! here, not after a trip through the main loop), send our own, and notice a
//! silent coordinator. Reconnects forever with a capped backoff.

use std::{
    net::{IpAddr, SocketAddr},
    time::Duration,
};

use cosched_proto::wire::{
    Heartbeat, HeartbeatReply, Message, ProtocolVersion, Register, Role, SessionConfig,
    SharedSecret,
    stamped::StampedRead,
    stream::{self, StreamError},
};
use prometheus::IntCounterVec;
use tokio::{
    net::TcpStream,
    sync::mpsc,
    time::{Instant, sleep, sleep_until, timeout},
};

use crate::daemon::monotonic_ns;

/// How long connecting and the handshake (with `Register`) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// What the link needs to know.
#[derive(Clone, Debug)]
pub struct LinkConfig {
    pub address: String,
    pub secret: SharedSecret,
    pub node: String,
    pub cpus: Vec<u32>,
    pub metrics_addr: Option<SocketAddr>,
    pub advertise_ip: Option<IpAddr>,
    pub heartbeat_interval: Duration,
    pub heartbeat_timeout: Duration,
    pub reconnect_min: Duration,
    pub reconnect_max: Duration,
}

/// What the link tells the main loop.
#[derive(Debug)]
pub enum LinkEvent {
    /// Registered with the coordinator, which speaks `protocol`; queued
    /// messages of earlier connections were dropped.
    Up { protocol: ProtocolVersion },
    /// The connection ended (or the coordinator went silent).
    Down { reason: String },
    /// A message for the main loop (heartbeats are handled by the link).
    Message(Message),
}

/// The main loop's way to send messages to the coordinator.
#[derive(Clone, Debug)]
pub struct LinkHandle {
    outbound: mpsc::UnboundedSender<Message>,
}

impl LinkHandle {
    /// A handle whose messages go to the returned receiver instead of a
    /// connection (for tests and tools).
    pub fn detached() -> (Self, mpsc::UnboundedReceiver<Message>) {
        let (outbound, receiver) = mpsc::unbounded_channel();
        (Self { outbound }, receiver)
    }

    /// Queues `message` for the current connection (dropped if there is
    /// none by the time a new one is made).
    pub fn send(&self, message: impl Into<Message>) {
        let _ = self.outbound.send(message.into());
    }
}

/// Starts the link task; wire rejections are counted in `rejected` by
/// reason.
pub fn spawn(
    config: LinkConfig,
    rejected: IntCounterVec,
) -> (LinkHandle, mpsc::UnboundedReceiver<LinkEvent>) {
    let (outbound_tx, outbound) = mpsc::unbounded_channel();
    let (events_tx, events) = mpsc::unbounded_channel();
    tokio::spawn(run(config, outbound, events_tx, rejected));
    (
        LinkHandle {
            outbound: outbound_tx,
        },
        events,
    )
}

async fn run(
    config: LinkConfig,
    mut outbound: mpsc::UnboundedReceiver<Message>,
    events: mpsc::UnboundedSender<LinkEvent>,
    rejected: IntCounterVec,
) {
    let mut backoff = config.reconnect_min;
    let mut last_failure = String::new();
    loop {
        match session(&config, &mut outbound, &events, &rejected).await {
            Ended::Established(reason) => {
                tracing::warn!(coordinator = %config.address, %reason, "coordinator link down; local policy runs alone");
                if events.send(LinkEvent::Down { reason }).is_err() {
                    return;
                }
                backoff = config.reconnect_min;
                last_failure.clear();
            }
            Ended::NeverUp(reason) => {
                // Log each distinct failure once, not every retry.
                if reason != last_failure {
                    tracing::warn!(coordinator = %config.address, %reason, "cannot join the coordinator; retrying");
                    last_failure = reason;
                }
            }
        }
        if events.is_closed() {
            return;
        }
        sleep(backoff).await;
        backoff = (backoff * 2).min(config.reconnect_max);
    }
}

enum Ended {
    Established(String),
    NeverUp(String),
}

fn count(rejected: &IntCounterVec, error: &StreamError) {
    let reason = error.reason();
    if reason != "io" {
        rejected.with_label_values(&[reason]).inc();
    }
}

async fn session(
    config: &LinkConfig,
    outbound: &mut mpsc::UnboundedReceiver<Message>,
    events: &mpsc::UnboundedSender<LinkEvent>,
    rejected: &IntCounterVec,
) -> Ended {
    let stream = match timeout(CONNECT_TIMEOUT, TcpStream::connect(&config.address)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(error)) => return Ended::NeverUp(format!("connecting: {error}")),
        Err(_) => return Ended::NeverUp("connecting timed out".into()),
    };
    let _ = stream.set_nodelay(true);
    let local_ip = stream.local_addr().map(|addr| addr.ip()).ok();
    let (reader, writer) = stream.into_split();
    // Receives stamped by the kernel: a heartbeat's t2 is when it arrived,
    // not when this task got to read it.
    let reader = StampedRead::new(reader);
    let session = SessionConfig::new(Role::Agent, config.node.clone(), config.secret.clone());
    let connection = match timeout(CONNECT_TIMEOUT, stream::initiate(reader, writer, session)).await
    {
        Ok(Ok(connection)) => connection,
        Ok(Err(error)) => {
            count(rejected, &error);
            return Ended::NeverUp(format!("handshake: {error}"));
        }
        Err(_) => return Ended::NeverUp("handshake timed out".into()),
    };
    let protocol = connection.peer.protocol;
    let (mut reader, mut writer) = (connection.reader, connection.writer);
    let ip = config
        .advertise_ip
        .or(local_ip)
        .unwrap_or(IpAddr::from([0, 0, 0, 0]));
    let register = Message::Register(Register {
        node_name: config.node.clone(),
        cpus: config.cpus.clone(),
        agent_addr: SocketAddr::new(ip, 0),
        metrics_addr: config.metrics_addr,
    });
    if let Err(error) = writer.send(&register).await {
        return Ended::NeverUp(format!("registering: {error}"));
    }
    while outbound.try_recv().is_ok() {}
    if events.send(LinkEvent::Up { protocol }).is_err() {
        return Ended::Established("agent shutting down".into());
    }
    tracing::info!(coordinator = %config.address, session = reader.session_id(), "joined the coordinator");

    let mut last_heard = Instant::now();
    let mut next_heartbeat = Instant::now() + config.heartbeat_interval;
    let mut sequence = 0u64;
    loop {
        tokio::select! {
            received = reader.recv_stamped() => {
                match received {
                    Ok(Some((Message::Heartbeat(heartbeat), received_ns))) => {
                        last_heard = Instant::now();
                        let reply = HeartbeatReply::answering(&heartbeat, received_ns, monotonic_ns());
                        if let Err(error) = writer.send(&Message::HeartbeatReply(reply)).await {
                            return Ended::Established(format!("replying to a heartbeat: {error}"));
                        }
                    }
                    Ok(Some((Message::HeartbeatReply(_), _))) => last_heard = Instant::now(),
                    Ok(Some((message, _))) => {
                        last_heard = Instant::now();
                        if events.send(LinkEvent::Message(message)).is_err() {
                            return Ended::Established("agent shutting down".into());
                        }
                    }
                    Ok(None) => return Ended::Established("the coordinator closed the connection".into()),
                    Err(error) => {
                        count(rejected, &error);
                        tracing::warn!(reason = error.reason(), "frame from the coordinator refused: {error}");
                        if error.is_fatal() {
                            return Ended::Established(format!("fatal wire error: {error}"));
                        }
                    }
                }
            }
            Some(message) = outbound.recv() => {
                if let Err(error) = writer.send(&message).await {
                    return Ended::Established(format!("sending {}: {error}", message.kind()));
                }
            }
            () = sleep_until(next_heartbeat) => {
                if last_heard.elapsed() > config.heartbeat_timeout {
                    return Ended::Established(format!(
                        "no message for {:?} (heartbeat timeout)",
                        config.heartbeat_timeout
                    ));
                }
                sequence += 1;
                let heartbeat = Heartbeat { seq: sequence, t1_ns: monotonic_ns() };
                if let Err(error) = writer.send(&Message::Heartbeat(heartbeat)).await {
                    return Ended::Established(format!("sending a heartbeat: {error}"));
                }
                next_heartbeat += config.heartbeat_interval;
            }
        }
    }
}
