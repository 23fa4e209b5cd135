//! The gang overlay: while the coordinator runs gang slices, a task of a job
//! outside the current slice is demoted (or stopped, in strict mode) whatever
//! its local policy wants; a task inside the slice keeps its policy's level.
//! The agent and the simulator both ask this function.

use super::action::Level;

/// A task's place in the current gang slice of its node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SliceMembership {
    /// The slice runs the task's job on this node.
    pub in_slice: bool,
    /// Stop (SIGSTOP) tasks outside the slice instead of demoting them.
    pub strict: bool,
}

/// The level the slice imposes, if it overrules the local policy: `None`
/// outside gang mode or inside the slice.
pub fn gang_overlay(membership: Option<SliceMembership>) -> Option<Level> {
    match membership {
        Some(SliceMembership {
            in_slice: false,
            strict,
        }) => Some(if strict { Level::Stop } else { Level::Demote }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_the_slice_a_task_is_demoted_or_stopped_inside_its_policy_decides() {
        let out = |strict| {
            Some(SliceMembership {
                in_slice: false,
                strict,
            })
        };
        assert_eq!(gang_overlay(out(false)), Some(Level::Demote));
        assert_eq!(gang_overlay(out(true)), Some(Level::Stop));
        let inside = SliceMembership {
            in_slice: true,
            strict: true,
        };
        assert_eq!(gang_overlay(Some(inside)), None);
        assert_eq!(gang_overlay(None), None);
    }
}
