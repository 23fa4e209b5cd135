//! Which unauthenticated connections may go on waiting.
//!
//! Anyone can open a TCP connection to the wire port and say nothing. Such
//! connections are not made to queue for a fixed number of handshake slots
//! (then a few hundred idle ones keep a real agent out until they time
//! out); instead every connection starts its handshake at once, and the
//! ones that have not authenticated yet are bounded per peer address and in
//! total. A new connection over either bound evicts the *oldest* one it
//! competes with: a flood of idle connections only ever pushes out its own
//! kind, while a real agent's handshake, which takes one round trip,
//! completes long before it becomes the oldest.
use std::{
    collections::{BTreeMap, HashMap},
    net::IpAddr,
};

/// Why a waiting connection was pushed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eviction {
    /// Its address had too many unauthenticated connections.
    AddressFull,
    /// There were too many unauthenticated connections in all.
    Full,
}

impl Eviction {
    /// The `reason` label it is counted under in `cosched_wire_rejected_total`.
    pub fn reason(self) -> &'static str {
        match self {
            Eviction::AddressFull => "unauthenticated_per_address_limit",
            Eviction::Full => "unauthenticated_limit",
        }
    }
}

/// A connection's place in the gate, to [`Gate::leave`] with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ticket(u64);

/// Unauthenticated connections, oldest first, each with a `T` (how to tell
/// it it was evicted).
#[derive(Debug)]
pub struct Gate<T> {
    per_address: usize,
    total: usize,
    next: u64,
    waiting: BTreeMap<Ticket, (IpAddr, T)>,
    by_address: HashMap<IpAddr, usize>,
}

impl<T> Gate<T> {
    /// At most `per_address` waiting connections from one address and
    /// `total` from all (both at least 1).
    pub fn new(per_address: usize, total: usize) -> Self {
        Gate {
            per_address: per_address.max(1),
            total: total.max(1),
            next: 0,
            waiting: BTreeMap::new(),
            by_address: HashMap::new(),
        }
    }

    /// Lets a connection from `address` in, and returns the connections it
    /// pushed out (to be told, with why).
    pub fn enter(&mut self, address: IpAddr, token: T) -> (Ticket, Vec<(T, Eviction)>) {
        let address = address.to_canonical();
        let mut evicted = Vec::new();
        if self.by_address.get(&address).copied().unwrap_or(0) >= self.per_address {
            let oldest = self
                .waiting
                .iter()
                .find(|(_, (from, _))| *from == address)
                .map(|(ticket, _)| *ticket);
            evicted.extend(oldest.and_then(|ticket| self.remove(ticket, Eviction::AddressFull)));
        }
        if self.waiting.len() >= self.total {
            let oldest = self.waiting.keys().next().copied();
            evicted.extend(oldest.and_then(|ticket| self.remove(ticket, Eviction::Full)));
        }
        let ticket = Ticket(self.next);
        self.next += 1;
        self.waiting.insert(ticket, (address, token));
        *self.by_address.entry(address).or_insert(0) += 1;
        (ticket, evicted)
    }

    /// The connection authenticated or ended; nothing if it was evicted.
    pub fn leave(&mut self, ticket: Ticket) {
        let _ = self.remove(ticket, Eviction::Full);
    }

    /// Connections waiting now.
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    fn remove(&mut self, ticket: Ticket, why: Eviction) -> Option<(T, Eviction)> {
        let (address, token) = self.waiting.remove(&ticket)?;
        if let Some(count) = self.by_address.get_mut(&address) {
            *count -= 1;
            if *count == 0 {
                self.by_address.remove(&address);
            }
        }
        Some((token, why))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn a_flood_from_one_address_evicts_its_own_oldest_and_no_one_else() {
        let mut gate = Gate::new(3, 100);
        let (agent, evicted) = gate.enter(ip(2), 100);
        assert!(evicted.is_empty());
        for index in 0..3 {
            let (_, evicted) = gate.enter(ip(9), index);
            assert!(evicted.is_empty());
        }
        let (_, evicted) = gate.enter(ip(9), 3);
        assert_eq!(evicted, [(0, Eviction::AddressFull)]);
        let (_, evicted) = gate.enter(ip(9), 4);
        assert_eq!(evicted, [(1, Eviction::AddressFull)]);
        assert_eq!(gate.len(), 4, "the agent and the flood's newest three");
        gate.leave(agent);
        assert_eq!(gate.len(), 3);
    }

    #[test]
    fn the_newest_connection_of_a_flooded_address_always_gets_in() {
        let mut gate = Gate::new(2, 100);
        let mut tickets = Vec::new();
        for index in 0..500 {
            tickets.push(gate.enter(ip(9), index).0);
        }
        let (_, evicted) = gate.enter(ip(9), 500);
        assert_eq!(evicted, [(498, Eviction::AddressFull)]);
        assert_eq!(gate.len(), 2);
        // Leaving after eviction is harmless.
        tickets.iter().for_each(|ticket| gate.leave(*ticket));
        assert_eq!(gate.len(), 1);
    }

    #[test]
    fn over_the_total_the_oldest_of_all_goes() {
        let mut gate = Gate::new(10, 3);
        gate.enter(ip(1), 'a');
        gate.enter(ip(2), 'b');
        gate.enter(ip(3), 'c');
        let (_, evicted) = gate.enter(ip(4), 'd');
        assert_eq!(evicted, [('a', Eviction::Full)]);
        let (_, evicted) = gate.enter(ip(2), 'e');
        assert_eq!(evicted, [('b', Eviction::Full)]);
        assert_eq!(gate.len(), 3);
    }

    #[test]
    fn ipv4_mapped_addresses_count_as_their_ipv4_address() {
        let mut gate = Gate::new(1, 10);
        gate.enter(ip(7), 1);
        let mapped = "::ffff:10.0.0.7".parse().unwrap();
        let (_, evicted) = gate.enter(mapped, 2);
        assert_eq!(evicted, [(1, Eviction::AddressFull)]);
    }

    #[test]
    fn both_bounds_can_evict_at_once_and_counts_stay_right() {
        let mut gate = Gate::new(1, 2);
        gate.enter(ip(1), 'a');
        gate.enter(ip(2), 'b');
        let (_, evicted) = gate.enter(ip(2), 'c');
        assert_eq!(evicted, [('b', Eviction::AddressFull)]);
        let (_, evicted) = gate.enter(ip(3), 'd');
        assert_eq!(evicted, [('a', Eviction::Full)]);
        assert_eq!(gate.len(), 2);
        assert_eq!(gate.by_address.len(), 2);
    }
}
