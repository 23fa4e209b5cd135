//! A stand-in agent: the real agent's coordinator link (`agent/src/coord/
//! link.rs` and `node.rs`) without eBPF, processes or `sched_setattr`.
//!
//! It connects from its own loopback address (127.x.y.z: the coordinator
//! bounds unauthenticated connections per address, and a real cluster has
//! one address per node), runs the real handshake as `Role::Agent`,
//! registers, sends its inventory (the jobs it "runs", kept across
//! sessions like a live agent's), answers heartbeats with CLOCK_MONOTONIC
//! timestamps and sends its own, answers program checks as runnable,
//! "launches" ranks by recording them, reports cancels and reaps, and
//! applies slice switches at their instant on the shared [`SwitchTimer`],
//! reporting `SliceSwitched` with the instant it switched; a `SliceSchedule`
//! (protocol 1.5) is followed as the real agent does: each slice armed when
//! the one before it switched, only its report slices reported. It reconnects
//! like the real agent (backoff from `reconnect_min` doubling to
//! `reconnect_max`).

use std::{
    collections::BTreeSet,
    net::{IpAddr, Ipv4Addr, SocketAddr},
    sync::Arc,
    time::Duration,
};

use cosched_proto::wire::{
    ClockSample, ExitStatus, Heartbeat, HeartbeatReply, JobExited, JobUtilisation, Message,
    ProgramCheck, ProgramChecked, RanksReaped, ReapedRank, Register, Role, SessionConfig,
    SharedSecret, SliceSchedule, SliceSwitched, SwitchSlice, UtilReport, monotonic_ns,
    stamped::StampedRead,
    stream::{self, WireReader, WireWriter},
};
use tokio::{
    net::{TcpSocket, tcp::OwnedWriteHalf},
    sync::mpsc::UnboundedReceiver,
    time::{Instant, sleep, sleep_until, timeout},
};

use crate::{
    stats::{Counters, Stats},
    timer::{Armed, Fired, SwitchTimer},
};

/// The inventory marker of the protocol (`UtilReport` entries with this
/// quantum list the jobs an agent runs).
pub const INVENTORY_QUANTUM: u64 = u64::MAX;
/// As the real agent's link.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// What every stand-in shares.
#[derive(Clone)]
pub struct AgentConfig {
    pub coordinator: SocketAddr,
    pub secret: SharedSecret,
    pub heartbeat_interval: Duration,
    pub heartbeat_timeout: Duration,
    pub reconnect_min: Duration,
    pub reconnect_max: Duration,
    /// CPU utilisation (0..=1) reported for every job run here with each
    /// switch report; `None`: no utilisation reports.
    pub utilisation: Option<f64>,
}

/// What the harness tells one agent.
#[derive(Debug, Clone, Copy)]
pub enum Command {
    /// Close the connection now (as a link that broke), then reconnect as
    /// the real agent does.
    Drop,
    /// Close the connection and stop.
    Stop,
}

/// The name of stand-in `index` (also the coordinator's node name).
pub fn node_name(index: usize) -> String {
    format!("n{index:04}")
}

/// The loopback address stand-in `index` connects from: 127.1.0.1,
/// 127.1.0.2, ... (never 127.0.0.1, the coordinator's).
pub fn source_ip(index: usize) -> Ipv4Addr {
    let n = index as u32 + 1;
    Ipv4Addr::new(127, 1 + (n >> 16) as u8, (n >> 8) as u8, n as u8)
}

/// Runs stand-in `index` until it is told to stop.
pub async fn run(
    index: usize,
    config: Arc<AgentConfig>,
    stats: Arc<Stats>,
    timer: SwitchTimer,
    mut fired: UnboundedReceiver<Fired>,
    mut commands: UnboundedReceiver<Command>,
) {
    let mut agent = Agent {
        index,
        name: node_name(index),
        jobs: BTreeSet::new(),
        session: 0,
        last_applied: None,
        heartbeat_seq: 0,
        schedule: None,
        schedules: 0,
    };
    let mut backoff = config.reconnect_min;
    loop {
        let ended = agent
            .session(&config, &stats, &timer, &mut fired, &mut commands)
            .await;
        match ended {
            Ended::Stop => return,
            Ended::Established => backoff = config.reconnect_min,
            Ended::NeverUp => {}
        }
        tokio::select! {
            () = sleep(backoff) => {}
            command = commands.recv() => match command {
                Some(Command::Stop) | None => return,
                Some(Command::Drop) => {}
            },
        }
        backoff = (backoff * 2).min(config.reconnect_max);
    }
}

/// When a message was read, and when the kernel received its bytes.
#[derive(Debug, Clone, Copy)]
struct Received {
    at_ns: u64,
    arrived_ns: Option<u64>,
}

enum Ended {
    Stop,
    Established,
    NeverUp,
}

struct Agent {
    index: usize,
    name: String,
    /// Ranks "running" here: job id → rank.
    jobs: BTreeSet<(u32, u32)>,
    session: u32,
    last_applied: Option<(u64, u64)>,
    heartbeat_seq: u64,
    /// The coordinator's schedule being followed, and how many arrived
    /// (the current one's number in [`Armed::schedule`]).
    schedule: Option<SliceSchedule>,
    schedules: u64,
}

type Reader = WireReader<StampedRead>;
type Writer = WireWriter<OwnedWriteHalf>;

impl Agent {
    async fn connect(
        &self,
        config: &AgentConfig,
        stats: &Stats,
    ) -> Result<(Reader, Writer), &'static str> {
        let ip = source_ip(self.index);
        let socket = TcpSocket::new_v4().map_err(|_| "socket")?;
        socket
            .bind(SocketAddr::new(IpAddr::V4(ip), 0))
            .map_err(|_| "bind")?;
        let stream = match timeout(CONNECT_TIMEOUT, socket.connect(config.coordinator)).await {
            Ok(Ok(stream)) => stream,
            _ => {
                Counters::bump(&stats.counters.connect_failures);
                return Err("connect");
            }
        };
        let _ = stream.set_nodelay(true);
        let (reader, writer) = stream.into_split();
        let reader = StampedRead::new(reader);
        let session = SessionConfig::new(Role::Agent, self.name.clone(), config.secret.clone());
        match timeout(CONNECT_TIMEOUT, stream::initiate(reader, writer, session)).await {
            Ok(Ok(connection)) => Ok((connection.reader, connection.writer)),
            _ => {
                Counters::bump(&stats.counters.handshake_failures);
                Err("handshake")
            }
        }
    }

    async fn session(
        &mut self,
        config: &AgentConfig,
        stats: &Stats,
        timer: &SwitchTimer,
        fired: &mut UnboundedReceiver<Fired>,
        commands: &mut UnboundedReceiver<Command>,
    ) -> Ended {
        let connected = tokio::select! {
            connected = self.connect(config, stats) => connected,
            command = commands.recv() => return match command {
                Some(Command::Drop) => Ended::NeverUp,
                Some(Command::Stop) | None => Ended::Stop,
            },
        };
        let Ok((mut reader, mut writer)) = connected else {
            return Ended::NeverUp;
        };
        self.session += 1;
        self.last_applied = None;
        self.schedule = None;
        let register = Message::Register(Register {
            node_name: self.name.clone(),
            cpus: vec![0],
            agent_addr: SocketAddr::new(IpAddr::V4(source_ip(self.index)), 0),
            metrics_addr: None,
        });
        let inventory = Message::UtilReport(UtilReport {
            jobs: self
                .jobs
                .iter()
                .map(|&(job_id, _)| JobUtilisation {
                    job_id,
                    quantum: INVENTORY_QUANTUM,
                    cpu_utilisation: 0.0,
                })
                .collect(),
        });
        if writer.send(&register).await.is_err() || writer.send(&inventory).await.is_err() {
            Counters::bump(&stats.counters.handshake_failures);
            return Ended::NeverUp;
        }
        let session = self.session;
        stats.with_agent(self.index, |seen| {
            seen.sessions += 1;
            seen.registered_ns = Some(monotonic_ns());
            seen.accepted_ns = None;
            seen.first_active_switch_ns = None;
        });
        // Switches armed in an earlier session are dropped on arrival.
        while fired.try_recv().is_ok() {}

        let mut last_heard = Instant::now();
        let mut next_heartbeat = Instant::now() + config.heartbeat_interval;
        let reason = loop {
            tokio::select! {
                received = reader.recv_stamped() => {
                    let received_ns = monotonic_ns();
                    last_heard = Instant::now();
                    match received {
                        Ok(Some((message, arrived_ns))) => {
                            // When the kernel received the bytes, before
                            // they waited for this task (the heartbeat's t2).
                            let arrived_ns = reader
                                .get_ref()
                                .last_kernel_stamped()
                                .then_some(arrived_ns);
                            let times = Received { at_ns: received_ns, arrived_ns };
                            if let Err(()) = self.on_message(message, times, &mut writer, stats, timer).await {
                                break Ended::Established;
                            }
                        }
                        Ok(None) => break Ended::Established,
                        Err(error) if error.is_fatal() => break Ended::Established,
                        Err(_) => {}
                    }
                }
                Some(done) = fired.recv() => {
                    if done.armed.session != session {
                        continue;
                    }
                    let report = SliceSwitched {
                        epoch: done.armed.epoch,
                        slice: done.armed.slice,
                        switched_at_ns: done.switched_at_ns,
                    };
                    let reports = self.reports(&done.armed);
                    self.arm_next_scheduled(&done.armed, stats, timer);
                    if reports && writer.send(&Message::SliceSwitched(report)).await.is_err() {
                        break Ended::Established;
                    }
                    if let Some(quanta) = reports.then(|| self.utilisation(config, done.armed.slice)).flatten()
                        && writer.send(&quanta).await.is_err()
                    {
                        break Ended::Established;
                    }
                }
                command = commands.recv() => match command {
                    Some(Command::Drop) => break Ended::Established,
                    Some(Command::Stop) | None => break Ended::Stop,
                },
                () = sleep_until(next_heartbeat) => {
                    if last_heard.elapsed() > config.heartbeat_timeout {
                        break Ended::Established;
                    }
                    self.heartbeat_seq += 1;
                    let heartbeat = Heartbeat { seq: self.heartbeat_seq, t1_ns: monotonic_ns() };
                    Counters::bump(&stats.counters.heartbeats_sent);
                    if writer.send(&Message::Heartbeat(heartbeat)).await.is_err() {
                        break Ended::Established;
                    }
                    next_heartbeat += config.heartbeat_interval;
                }
            }
        };
        Counters::bump(&stats.counters.sessions_ended);
        // Dropping the halves closes the socket (FIN), as a process whose
        // link broke would.
        drop((reader, writer));
        reason
    }

    async fn on_message(
        &mut self,
        message: Message,
        times: Received,
        writer: &mut Writer,
        stats: &Stats,
        timer: &SwitchTimer,
    ) -> Result<(), ()> {
        let counters = &stats.counters;
        let received_ns = times.at_ns;
        let reply = match message {
            Message::Heartbeat(heartbeat) => {
                Counters::bump(&counters.coordinator_heartbeats_answered);
                if times.arrived_ns.is_some() {
                    Counters::bump(&counters.heartbeats_kernel_stamped);
                }
                Some(Message::HeartbeatReply(HeartbeatReply::answering(
                    &heartbeat,
                    times.arrived_ns.unwrap_or(received_ns),
                    monotonic_ns(),
                )))
            }
            Message::HeartbeatReply(reply) => {
                Counters::bump(&counters.heartbeat_replies);
                stats.heartbeat_rtt(ClockSample::from_reply(&reply, received_ns).round_trip_ns);
                None
            }
            Message::SetPolicy(_) => {
                stats.with_agent(self.index, |seen| {
                    seen.accepted_ns.get_or_insert(received_ns);
                });
                None
            }
            Message::SwitchSlice(switch) => {
                self.schedule = None;
                self.on_switch(switch, received_ns, stats, timer, 0)
            }
            Message::SliceSchedule(schedule) => {
                Counters::bump(&counters.schedules);
                stats.report_every(schedule.report_every);
                self.on_schedule(schedule, received_ns, stats, timer)
            }
            Message::LaunchJob(launch) => {
                self.jobs.insert((launch.job_id, launch.rank));
                stats.with_agent(self.index, |seen| seen.launches += 1);
                None
            }
            Message::CheckProgram(check) => {
                Counters::bump(&counters.program_checks);
                Some(Message::ProgramChecked(ProgramChecked {
                    check_id: check.check_id,
                    outcome: ProgramCheck::Runnable {
                        path: check.command.clone(),
                    },
                }))
            }
            Message::CancelJob(cancel) => {
                Counters::bump(&counters.cancels);
                let ranks: Vec<(u32, u32)> = self
                    .jobs
                    .iter()
                    .filter(|(job, _)| *job == cancel.job_id)
                    .copied()
                    .collect();
                for rank in &ranks {
                    self.jobs.remove(rank);
                }
                ranks.first().map(|&(job_id, rank)| {
                    Message::JobExited(JobExited {
                        job_id,
                        rank,
                        status: ExitStatus::Signalled { signal: 15 },
                    })
                })
            }
            Message::ReapRanks(reap) => {
                Counters::bump(&counters.reaps);
                for rank in &reap.ranks {
                    self.jobs.remove(&(rank.job_id, rank.rank));
                }
                Some(Message::RanksReaped(RanksReaped {
                    ranks: reap
                        .ranks
                        .iter()
                        .map(|rank| ReapedRank {
                            job_id: rank.job_id,
                            rank: rank.rank,
                            processes: 0,
                        })
                        .collect(),
                }))
            }
            Message::Error(_) => {
                Counters::bump(&counters.errors_from_coordinator);
                None
            }
            _ => None,
        };
        match reply {
            Some(reply) => writer.send(&reply).await.map_err(|_| ()),
            None => Ok(()),
        }
    }

    /// A schedule replaces the last from its first slice (or, when that
    /// one is already armed, from the next).
    fn on_schedule(
        &mut self,
        schedule: SliceSchedule,
        received_ns: u64,
        stats: &Stats,
        timer: &SwitchTimer,
    ) -> Option<Message> {
        self.schedules += 1;
        let mut first = schedule.first_slice;
        if let Some((epoch, slice)) = self.last_applied
            && epoch == schedule.epoch
            && slice >= first
        {
            first = slice + 1;
        }
        first = first.max(schedule.next_from(received_ns).saturating_sub(1));
        let switch = schedule.switch(first)?;
        self.schedule = Some(schedule);
        let reply = self.on_switch(switch, received_ns, stats, timer, self.schedules);
        // Applied at once (late): arm the one after.
        if let (Some(_), Some((epoch, slice))) = (&reply, self.last_applied) {
            let armed = Armed {
                at_ns: 0,
                agent: self.index,
                session: self.session,
                epoch,
                slice,
                schedule: self.schedules,
            };
            self.arm_next_scheduled(&armed, stats, timer);
        }
        reply.filter(|message| match message {
            Message::SliceSwitched(switched) => self
                .schedule
                .as_ref()
                .is_none_or(|schedule| schedule.reports(switched.slice)),
            _ => true,
        })
    }

    /// Whether a switch that fired is reported: a schedule's only on its
    /// report slices.
    /// The utilisation report sent with a switch report, as the agent
    /// sends its quanta: every job run here at the configured utilisation,
    /// for the reported slice's quantum.
    fn utilisation(&self, config: &AgentConfig, slice: u64) -> Option<Message> {
        let utilisation = config.utilisation?;
        let jobs: BTreeSet<u32> = self.jobs.iter().map(|&(job, _)| job).collect();
        (!jobs.is_empty()).then(|| {
            Message::UtilReport(UtilReport {
                jobs: jobs
                    .into_iter()
                    .map(|job_id| JobUtilisation {
                        job_id,
                        quantum: slice,
                        cpu_utilisation: utilisation,
                    })
                    .collect(),
            })
        })
    }

    fn reports(&self, armed: &Armed) -> bool {
        match &self.schedule {
            Some(schedule) if armed.epoch == schedule.epoch => schedule.reports(armed.slice),
            _ => true,
        }
    }

    /// After a scheduled slice switched, arms the schedule's next one (the
    /// next still to come).
    fn arm_next_scheduled(&mut self, done: &Armed, stats: &Stats, timer: &SwitchTimer) {
        if done.schedule == 0 || done.schedule != self.schedules {
            return;
        }
        let Some(schedule) = &self.schedule else {
            return;
        };
        let now = monotonic_ns();
        let next = (done.slice + 1).max(schedule.next_from(now));
        let Some(at_ns) = schedule.apply_at_ns(next) else {
            return;
        };
        let epoch = schedule.epoch;
        self.last_applied = Some((epoch, next));
        stats.with_agent(self.index, |seen| seen.switches += 1);
        timer.arm(Armed {
            at_ns,
            agent: self.index,
            session: self.session,
            epoch,
            slice: next,
            schedule: self.schedules,
        });
    }

    /// As the real agent's `timing`: arm it, apply a late strict one now,
    /// drop stale ones.
    fn on_switch(
        &mut self,
        switch: SwitchSlice,
        received_ns: u64,
        stats: &Stats,
        timer: &SwitchTimer,
        schedule: u64,
    ) -> Option<Message> {
        let key = (switch.epoch, switch.slice);
        stats.announced(key, received_ns, switch.apply_at_ns);
        let active = !switch.active_jobs.is_empty();
        stats.with_agent(self.index, |seen| {
            seen.switches += 1;
            if active {
                seen.active_switches += 1;
                seen.first_active_switch_ns.get_or_insert(received_ns);
            }
        });
        if self
            .last_applied
            .is_some_and(|(epoch, slice)| epoch == switch.epoch && switch.slice <= slice)
        {
            Counters::bump(&stats.counters.switches_stale);
            return None;
        }
        self.last_applied = Some(key);
        if switch.apply_at_ns > received_ns {
            timer.arm(Armed {
                at_ns: switch.apply_at_ns,
                agent: self.index,
                session: self.session,
                epoch: switch.epoch,
                slice: switch.slice,
                schedule,
            });
            return None;
        }
        Counters::bump(&stats.counters.switches_applied_late);
        let switched_at_ns = monotonic_ns();
        stats.switched(key, switched_at_ns, switch.apply_at_ns);
        Some(Message::SliceSwitched(SliceSwitched {
            epoch: switch.epoch,
            slice: switch.slice,
            switched_at_ns,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_agent_has_its_own_loopback_address() {
        let addresses: BTreeSet<Ipv4Addr> = (0..70_000).map(source_ip).collect();
        assert_eq!(addresses.len(), 70_000);
        assert!(addresses.iter().all(|ip| ip.is_loopback()));
        assert!(!addresses.contains(&Ipv4Addr::LOCALHOST));
        assert_eq!(source_ip(0), Ipv4Addr::new(127, 1, 0, 1));
    }
}
