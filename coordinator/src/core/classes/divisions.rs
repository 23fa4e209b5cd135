//! 2DCS-TDM's global part (§4.2): the cluster alternates an RT division and
//! a BE division every Δ, split x:y. At each boundary the coordinator tells
//! every ready node which division starts, in the node's own clock and
//! ahead of time, exactly as it announces slices; the nodes report when they
//! switched, and the spread of those instants is the division switch skew.
//!
//! The clock is anchored at the first boundary planned under 2DCS-TDM. If
//! the coordinator falls behind (the daemon moves the next boundary), the
//! clock restarts there with an RT division; division numbers go on
//! growing within the epoch, so reports stay unambiguous.

use cosched_policy::{
    classes::{Class, Division},
    global::NodeIndex,
};
use cosched_proto::wire::{DivisionClass, DivisionSwitched, MessageKind, SwitchDivision};

use super::{ClassState, DivisionTrack};
use crate::core::{Core, Observed};

fn wire_class(class: Class) -> DivisionClass {
    match class {
        Class::RealTime => DivisionClass::RealTime,
        Class::BestEffort => DivisionClass::BestEffort,
    }
}

impl Core {
    /// Broadcasts the division that starts at `start_ns` (coordinator
    /// clock) to every ready node; returns when the next one starts.
    pub(in crate::core) fn plan_division(&mut self, start_ns: u64) -> u64 {
        let ClassState::Divided(divided) = &mut self.classes else {
            unreachable!("divisions are planned under 2dcs-tdm only");
        };
        let (division, number) = match &mut divided.clock {
            Some(track) if track.current.end_ns == start_ns => {
                track.current = track.clock.next(&track.current);
                track.number += 1;
                (track.current, track.number)
            }
            other => {
                let number = other.as_ref().map_or(0, |track| track.number + 1);
                let clock = self
                    .config
                    .classes
                    .division_clock(start_ns)
                    .expect("the [classes] table was validated");
                let current = clock.division_at(start_ns);
                *other = Some(DivisionTrack {
                    clock,
                    current,
                    number,
                });
                (current, number)
            }
        };
        let ready: Vec<NodeIndex> = (0..self.nodes.len())
            .filter(|&node| self.nodes[node].is_ready())
            .filter(|&node| self.nodes[node].knows(MessageKind::SwitchDivision))
            .collect();
        let mut told = std::collections::BTreeMap::new();
        for &node in &ready {
            let message = self.division_message(node, &division, number);
            told.insert(node, message.apply_at_ns);
            self.send(node, message);
        }
        self.observe(Observed::DivisionSwitch {
            class: wire_class(division.class),
        });
        let closed = self
            .division_skew
            .expect(self.epoch, number, division.start_ns, told);
        for observation in closed {
            self.observe(Observed::DivisionSkew(observation));
        }
        division.end_ns
    }

    fn division_message(
        &self,
        node: NodeIndex,
        division: &Division,
        number: u64,
    ) -> SwitchDivision {
        let state = &self.nodes[node];
        SwitchDivision {
            epoch: self.epoch,
            division: number,
            class: wire_class(division.class),
            apply_at_ns: state.to_agent_clock(division.start_ns),
            ends_at_ns: state.to_agent_clock(division.end_ns),
        }
    }

    /// A node that became ready mid-division hears the current one at once
    /// (already due: its agent applies it now), not at the next boundary.
    pub(in crate::core) fn send_current_division(&mut self, node: NodeIndex) {
        let Some(track) = self.current_division() else {
            return;
        };
        if self.nodes[node].knows(MessageKind::SwitchDivision) {
            let message = self.division_message(node, &track.current, track.number);
            self.send(node, message);
        }
    }

    /// The division broadcast last (2DCS-TDM, once the clock started).
    pub(in crate::core) fn current_division(&self) -> Option<DivisionTrack> {
        match &self.classes {
            ClassState::Divided(divided) => divided.clock.clone(),
            _ => None,
        }
    }

    /// `node` reports when it switched to a division: its lateness and,
    /// once every node reported, the division's skew are observed.
    pub fn division_switched(&mut self, node: NodeIndex, switched: &DivisionSwitched) {
        let observations = self.division_skew.switched(
            switched.epoch,
            switched.division,
            node,
            switched.switched_at_ns,
        );
        for observation in observations {
            self.observe(Observed::DivisionSkew(observation));
        }
    }
}
