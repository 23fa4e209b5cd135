//! The three-phase executive (seed 003, §III; Pidd): A advances the clock to
//! the next bound event, B executes every bound (unconditional) event due at
//! that instant, C scans the conditional activities again and again until none
//! of them fires.
//!
//! Bound events due at the same instant run in the order they were scheduled
//! (a sequence number breaks ties), so a run is a pure function of its inputs.
//! Events are never removed from the calendar: a model cancels one by keeping
//! a token and ignoring the stale event when it comes (seed 003 needs
//! cancellation for its B2 time-slice events).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Simulated time in nanoseconds.
pub type Ns = u64;

/// A simulated system, as the executive sees it.
pub trait Model {
    /// A bound event.
    type Event;

    /// B phase: `event` is due now.
    fn bound(&mut self, event: Self::Event, calendar: &mut Calendar<Self::Event>);

    /// C phase: tries the conditional activities in their fixed order and
    /// returns whether any fired (the executive then scans again).
    fn conditional(&mut self, calendar: &mut Calendar<Self::Event>) -> bool;
}

struct Entry<E> {
    at: Ns,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl<E> Eq for Entry<E> {}

impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> Ord for Entry<E> {
    /// Reversed: the max-heap pops the earliest, then the first scheduled.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// The calendar of bound events and the clock.
pub struct Calendar<E> {
    now: Ns,
    seq: u64,
    heap: BinaryHeap<Entry<E>>,
}

impl<E> Default for Calendar<E> {
    fn default() -> Self {
        Self {
            now: 0,
            seq: 0,
            heap: BinaryHeap::new(),
        }
    }
}

impl<E> Calendar<E> {
    /// The current simulated time.
    pub fn now(&self) -> Ns {
        self.now
    }

    /// Schedules `event` at `at` (an instant in the past means now).
    pub fn at(&mut self, at: Ns, event: E) {
        let at = at.max(self.now);
        self.heap.push(Entry {
            at,
            seq: self.seq,
            event,
        });
        self.seq += 1;
    }

    /// Schedules `event` `delay` after now.
    pub fn after(&mut self, delay: Ns, event: E) {
        self.at(self.now.saturating_add(delay), event);
    }

    /// Events waiting in the calendar.
    pub fn pending(&self) -> usize {
        self.heap.len()
    }

    fn next_time(&self) -> Option<Ns> {
        self.heap.peek().map(|e| e.at)
    }

    fn pop_due(&mut self) -> Option<E> {
        if self.next_time()? == self.now {
            self.heap.pop().map(|e| e.event)
        } else {
            None
        }
    }
}

/// Counters of one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExecutiveStats {
    /// A phases (distinct instants).
    pub instants: u64,
    /// B events executed.
    pub bound_events: u64,
    /// C activities that fired.
    pub conditional_fired: u64,
}

/// Runs a model phase by phase.
pub struct Executive<M: Model> {
    pub model: M,
    pub calendar: Calendar<M::Event>,
    pub stats: ExecutiveStats,
}

impl<M: Model> Executive<M> {
    pub fn new(model: M) -> Self {
        Self {
            model,
            calendar: Calendar::default(),
            stats: ExecutiveStats::default(),
        }
    }

    /// An executive over a model whose initial events are already on `calendar`.
    pub fn from_parts(model: M, calendar: Calendar<M::Event>) -> Self {
        Self {
            model,
            calendar,
            stats: ExecutiveStats::default(),
        }
    }

    /// One A-B-C cycle; false when the calendar is empty.
    pub fn step(&mut self) -> bool {
        // A: advance to the next bound event.
        let Some(next) = self.calendar.next_time() else {
            return false;
        };
        self.calendar.now = next;
        self.stats.instants += 1;
        // B: every bound event due now, including those scheduled for now by
        // other B events.
        while let Some(event) = self.calendar.pop_due() {
            self.stats.bound_events += 1;
            self.model.bound(event, &mut self.calendar);
        }
        // C: conditional activities until quiescent.
        while self.model.conditional(&mut self.calendar) {
            self.stats.conditional_fired += 1;
        }
        true
    }

    /// Steps until the calendar is empty or `stop` says so (checked between
    /// cycles).
    pub fn run_while(&mut self, mut keep_going: impl FnMut(&M, &ExecutiveStats) -> bool) {
        while keep_going(&self.model, &self.stats) && self.step() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records what ran; C activity "drain" fires while `pending` > 0, one
    /// unit at a time, and may only run after the B phase of its instant.
    #[derive(Default)]
    struct Recorder {
        log: Vec<String>,
        pending: u32,
    }

    enum Ev {
        Mark(&'static str),
        Add(u32),
        Spawn(&'static str),
    }

    impl Model for Recorder {
        type Event = Ev;
        fn bound(&mut self, event: Ev, cal: &mut Calendar<Ev>) {
            match event {
                Ev::Mark(name) => self.log.push(format!("B {name} @{}", cal.now())),
                Ev::Add(n) => {
                    self.pending += n;
                    self.log.push(format!("B add {n} @{}", cal.now()));
                }
                Ev::Spawn(name) => {
                    self.log.push(format!("B spawn @{}", cal.now()));
                    cal.after(0, Ev::Mark(name));
                }
            }
        }
        fn conditional(&mut self, cal: &mut Calendar<Ev>) -> bool {
            if self.pending == 0 {
                return false;
            }
            self.pending -= 1;
            self.log.push(format!("C drain @{}", cal.now()));
            true
        }
    }

    #[test]
    fn bound_events_of_an_instant_all_run_before_its_conditional_activities() {
        let mut ex = Executive::new(Recorder::default());
        ex.calendar.at(5, Ev::Add(1));
        ex.calendar.at(5, Ev::Mark("late"));
        ex.run_while(|_, _| true);
        assert_eq!(ex.model.log, ["B add 1 @5", "B late @5", "C drain @5"]);
    }

    #[test]
    fn conditional_activities_are_scanned_until_none_fires() {
        let mut ex = Executive::new(Recorder::default());
        ex.calendar.at(1, Ev::Add(3));
        ex.run_while(|_, _| true);
        assert_eq!(
            ex.model.log.iter().filter(|l| l.starts_with('C')).count(),
            3
        );
        assert_eq!(ex.stats.conditional_fired, 3);
        assert_eq!(ex.model.pending, 0);
    }

    #[test]
    fn same_instant_events_run_in_scheduling_order_and_zero_delay_ones_join_the_b_phase() {
        let mut ex = Executive::new(Recorder::default());
        ex.calendar.at(7, Ev::Mark("b"));
        ex.calendar.at(3, Ev::Spawn("child"));
        ex.calendar.at(7, Ev::Mark("a"));
        ex.calendar.at(3, Ev::Add(1));
        ex.run_while(|_, _| true);
        assert_eq!(
            ex.model.log,
            [
                "B spawn @3",
                "B add 1 @3",
                "B child @3",
                "C drain @3",
                "B b @7",
                "B a @7"
            ]
        );
        assert_eq!(ex.stats.instants, 2);
    }

    #[test]
    fn an_event_in_the_past_runs_now() {
        let mut ex = Executive::new(Recorder::default());
        ex.calendar.at(10, Ev::Mark("x"));
        ex.step();
        ex.calendar.at(2, Ev::Mark("past"));
        ex.step();
        assert_eq!(ex.model.log, ["B x @10", "B past @10"]);
    }
}
