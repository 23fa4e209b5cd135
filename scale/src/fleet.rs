//! Many stand-in agents in one tokio runtime, with one switch timer.

use std::sync::Arc;

use tokio::{
    runtime::Runtime,
    sync::mpsc::{UnboundedSender, unbounded_channel},
    task::JoinHandle,
};

use crate::{
    ScaleError,
    standin::{self, AgentConfig, Command},
    stats::Stats,
    timer::SwitchTimer,
};

pub struct Fleet {
    pub stats: Arc<Stats>,
    commands: Vec<UnboundedSender<Command>>,
    tasks: Vec<JoinHandle<()>>,
    timer: SwitchTimer,
}

impl Fleet {
    /// Starts `agents` stand-ins on `runtime`, all connecting at once (the
    /// switch timer at SCHED_FIFO `timer_fifo_priority`, 0: SCHED_OTHER).
    pub fn start(
        runtime: &Runtime,
        agents: usize,
        config: AgentConfig,
        timer_fifo_priority: u32,
    ) -> Result<Self, ScaleError> {
        let stats = Arc::new(Stats::new(agents));
        let (fired_tx, fired_rx): (Vec<_>, Vec<_>) =
            (0..agents).map(|_| unbounded_channel()).unzip();
        let timer = SwitchTimer::spawn(fired_tx, stats.clone(), timer_fifo_priority)?;
        let config = Arc::new(config);
        let mut commands = Vec::with_capacity(agents);
        let mut tasks = Vec::with_capacity(agents);
        for (index, fired) in fired_rx.into_iter().enumerate() {
            let (command_tx, command_rx) = unbounded_channel();
            commands.push(command_tx);
            tasks.push(runtime.spawn(standin::run(
                index,
                config.clone(),
                stats.clone(),
                timer.clone(),
                fired,
                command_rx,
            )));
        }
        Ok(Self {
            stats,
            commands,
            tasks,
            timer,
        })
    }

    pub fn len(&self) -> usize {
        self.commands.len()
    }

    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }

    /// Breaks the links of `agents` at once; they reconnect as real agents do.
    pub fn drop_links(&self, agents: &[usize]) {
        for &agent in agents {
            let _ = self.commands[agent].send(Command::Drop);
        }
    }

    /// Stops every stand-in and waits for them.
    pub fn stop(self, runtime: &Runtime) {
        for command in &self.commands {
            let _ = command.send(Command::Stop);
        }
        runtime.block_on(async {
            for task in self.tasks {
                let _ = task.await;
            }
        });
        self.timer.stop();
    }
}
