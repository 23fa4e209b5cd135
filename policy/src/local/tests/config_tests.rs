//! Configuration names, defaults, validation and the factory.

use crate::local::{
    ConfigError, DcsParams, FairnessParams, FcsParams, LocalPolicyConfig, PeriodicBoostParams,
    PolicyKind, SpinBlockParams, SpinLearningParams, build_policy,
};
use serde::Deserialize;
use serde::de::IntoDeserializer;
use serde::de::value::{Error as ValueError, MapDeserializer};

#[test]
fn policy_kinds_use_the_documented_config_names() {
    let names = ["local", "dcs", "sb", "sy", "pb", "pb-sb", "dcs-sb", "fcs"];
    for (kind, name) in PolicyKind::ALL.into_iter().zip(names) {
        assert_eq!(kind.as_str(), name);
        assert_eq!(name.parse::<PolicyKind>(), Ok(kind));
        let de: serde::de::value::StrDeserializer<'_, ValueError> = name.into_deserializer();
        assert_eq!(PolicyKind::deserialize(de), Ok(kind));
    }
    assert!("pbsb".parse::<PolicyKind>().is_err());
}

#[test]
fn params_fill_missing_fields_with_defaults_and_reject_unknown_ones() {
    let de = MapDeserializer::<_, ValueError>::new(vec![("period_us", 500u64)].into_iter());
    let pb = PeriodicBoostParams::deserialize(de).expect("known field");
    assert_eq!(
        pb,
        PeriodicBoostParams {
            period_us: 500,
            ..Default::default()
        }
    );

    let de = MapDeserializer::<_, ValueError>::new(vec![("period", 500u64)].into_iter());
    assert!(
        PeriodicBoostParams::deserialize(de).is_err(),
        "typo must not be ignored"
    );

    let de = MapDeserializer::<_, ValueError>::new(Vec::<(&str, u64)>::new().into_iter());
    assert_eq!(
        DcsParams::deserialize(de).expect("empty table"),
        DcsParams::default()
    );
}

#[test]
fn end_on_wait_unset_is_each_policys_default_and_a_set_value_wins() {
    let unset = DcsParams::default();
    assert_eq!(unset.end_on_wait, None);
    assert!(unset.ends_on_wait(PolicyKind::Dcs), "dcs: per-message");
    assert!(!unset.ends_on_wait(PolicyKind::DcsSb), "dcs-sb: quantum");
    for value in [false, true] {
        let set = DcsParams {
            end_on_wait: Some(value),
            ..DcsParams::default()
        };
        for kind in [PolicyKind::Dcs, PolicyKind::DcsSb] {
            assert_eq!(set.ends_on_wait(kind), value, "{kind:?}");
        }
    }
}

#[test]
fn documented_defaults() {
    assert_eq!(
        DcsParams::default(),
        DcsParams {
            max_boost_us: 5_000,
            boost_prio: 10,
            end_on_wait: None,
            wait_grace_us: 0,
            end_on_wait_after_send: false,
            yield_after_quantum_us: 0,
            boost_computing: false,
            take_turns: true,
        }
    );
    assert_eq!(PeriodicBoostParams::default().period_us, 1_000);
    assert_eq!(
        FairnessParams::default(),
        FairnessParams {
            window_us: 100_000,
            max_boosted_percent: 50,
            max_node_boosted_percent: 80,
            equal_cpu_share: true,
            cpu_share_slack_percent: 5,
        }
    );
    let sb = SpinBlockParams::default();
    assert_eq!(
        (sb.spin_threshold_us, sb.max_block_us, sb.wake_boost),
        (500, 100_000, true)
    );
    let fcs = FcsParams::default();
    assert_eq!(
        (fcs.measure_cs_slots, fcs.measure_dc_slots, fcs.top_prio),
        (2, 2, 20)
    );
    assert_eq!(LocalPolicyConfig::default().kind, PolicyKind::Local);
}

#[test]
fn every_kind_builds_from_its_default_config() {
    for kind in PolicyKind::ALL {
        let policy = build_policy(&LocalPolicyConfig::for_kind(kind)).expect("defaults are valid");
        assert_eq!(policy.kind(), kind);
    }
}

#[test]
fn invalid_values_are_rejected_naming_the_field() {
    let mut config = LocalPolicyConfig::for_kind(PolicyKind::Dcs);
    config.pb.period_us = 0;
    assert_eq!(
        build_policy(&config).unwrap_err(),
        ConfigError::Zero {
            field: "pb.period_us".into()
        }
    );

    let mut config = LocalPolicyConfig::default();
    config.sb.learning = SpinLearningParams {
        min_us: 900,
        max_us: 100,
        ..Default::default()
    };
    let err = build_policy(&config).unwrap_err();
    assert!(
        matches!(&err, ConfigError::Inverted { low_field, .. } if low_field == "sb.learning.min_us"),
        "{err}"
    );

    let mut config = LocalPolicyConfig::default();
    config.fairness.max_boosted_percent = 0;
    assert!(matches!(
        build_policy(&config),
        Err(ConfigError::OutOfRange { .. })
    ));

    let mut config = LocalPolicyConfig::default();
    config.fcs.cs_dc_rate_ratio = f64::NAN;
    assert!(matches!(
        build_policy(&config),
        Err(ConfigError::NotPositive { .. })
    ));

    let mut config = LocalPolicyConfig::default();
    config.dcs.boost_prio = 0;
    let err = build_policy(&config).unwrap_err();
    assert_eq!(err.to_string(), "dcs.boost_prio = 0 is outside 1..=99");
}

#[test]
fn an_adaptive_threshold_must_not_start_above_its_bound() {
    let adaptive = SpinBlockParams {
        adapt_threshold: true,
        spin_threshold_us: 5_000,
        max_spin_threshold_us: 4_000,
        ..Default::default()
    };
    assert!(adaptive.validate().is_err());
    let fixed = SpinBlockParams {
        adapt_threshold: false,
        ..adaptive
    };
    assert!(
        fixed.validate().is_ok(),
        "the bound only matters when adapting"
    );
}

#[test]
fn an_mpl_aware_threshold_above_its_bound_is_accepted() {
    // The bound is then moot: a spinner is blocked at its threshold.
    let aware = SpinBlockParams {
        mpl_aware: true,
        adapt_threshold: false,
        spin_threshold_us: 5_000,
        max_spin_threshold_us: 4_000,
        ..Default::default()
    };
    assert!(aware.validate().is_ok());
}
