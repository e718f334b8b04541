//! identity: enrollment, credentials, reset and retirement.

use cipherfleet_coordinator::domain::credential::NewCredential;
use cipherfleet_coordinator::domain::job::JobStatus;
use cipherfleet_coordinator::store::identity::{self, Admission, Enrollment, Refusal};
use cipherfleet_coordinator::store::jobs;
use std::time::Duration;

use cipherfleet_coordinator::domain::facts::NormalisedFacts;
use cipherfleet_coordinator::store::leases::{self, Holder};
use cipherfleet_coordinator::store::{campaigns, capabilities, hosts};
use cipherfleet_core::path::Path;
use uuid::Uuid;

use super::fixture::*;

#[tokio::test]
async fn a_host_is_who_holds_its_credential_until_an_operator_says_otherwise() {
    let f = populate().await;
    let pool = &f.pool;
    let issue = || NewCredential::generate().unwrap();

    // A new name needs the token and is issued the credential given.
    let new = issue();
    assert_eq!(
        identity::admit(pool, "new-01", "", false, &new).await.unwrap(),
        Err(Refusal::BadToken)
    );
    assert_eq!(
        hosts::find_by_name(pool, "new-01").await.unwrap(),
        None,
        "nothing stored"
    );
    let enrolled = identity::admit(pool, "new-01", "", true, &new).await.unwrap().unwrap();
    let Admission::Enrolled {
        host_id,
        how: Enrollment::New,
    } = enrolled
    else {
        panic!("{enrolled:?}")
    };
    assert_eq!(
        identity::admit(pool, "new-01", new.secret(), false, &issue())
            .await
            .unwrap(),
        Ok(Admission::Known { host_id }),
        "the credential alone admits it"
    );
    for (presented, token) in [
        ("", true),
        ("not-its-credential", true),
        (&issue().secret().to_string()[..], true),
    ] {
        assert_eq!(
            identity::admit(pool, "new-01", presented, token, &issue())
                .await
                .unwrap(),
            Err(Refusal::WrongCredential),
            "{presented:?}"
        );
    }

    // bench-01 was enrolled before credentials: the first agent with the token claims it.
    let claim = issue();
    assert_eq!(
        identity::admit(pool, "bench-01", "", true, &claim).await.unwrap(),
        Ok(Admission::Enrolled {
            host_id: f.bench,
            how: Enrollment::Claimed
        })
    );
    assert_eq!(
        identity::admit(pool, "bench-01", "", true, &issue()).await.unwrap(),
        Err(Refusal::WrongCredential),
        "claimed once"
    );

    // Reset: the old credential stops working; the token enrolls it again.
    assert_eq!(
        identity::reset_credential(pool, "bench-01").await.unwrap(),
        Some(f.bench)
    );
    assert_eq!(identity::reset_credential(pool, "nobody").await.unwrap(), None);
    assert_eq!(
        identity::admit(pool, "bench-01", claim.secret(), false, &issue())
            .await
            .unwrap(),
        Err(Refusal::BadToken)
    );
    let again = issue();
    assert_eq!(
        identity::admit(pool, "bench-01", claim.secret(), true, &again)
            .await
            .unwrap(),
        Ok(Admission::Enrolled {
            host_id: f.bench,
            how: Enrollment::Claimed
        })
    );

    // Retire: its unfinished jobs fail, its campaign ends, it is admitted no more,
    // and its history stays.
    let [first, second] = f.live_jobs;
    let retired = identity::retire(pool, "bench-01").await.unwrap().expect("bench-01");
    assert_eq!(retired.host_id, f.bench);
    let mut failed = retired.failed_jobs.clone();
    failed.sort();
    let mut want = vec![first, second];
    want.sort();
    assert_eq!(failed, want);
    let job = jobs::get(pool, first).await.unwrap().unwrap();
    assert_eq!(job.status, JobStatus::Failed);
    assert!(job.error.unwrap().contains("retired"));
    assert!(
        campaigns::get(pool, f.live)
            .await
            .unwrap()
            .unwrap()
            .finished_at
            .is_some()
    );
    assert_eq!(
        identity::admit(pool, "bench-01", again.secret(), true, &issue())
            .await
            .unwrap(),
        Err(Refusal::Retired)
    );
    let bench = hosts::get(pool, f.bench).await.unwrap().unwrap();
    let retired_at = bench.retired_at.expect("marked retired");
    let twice = identity::retire(pool, "bench-01").await.unwrap().unwrap();
    assert!(twice.failed_jobs.is_empty());
    assert_eq!(
        hosts::get(pool, f.bench).await.unwrap().unwrap().retired_at,
        Some(retired_at)
    );
    assert_eq!(identity::retire(pool, "nobody").await.unwrap(), None);
    assert_eq!(
        hosts::list(pool).await.unwrap().len(),
        3,
        "a retired host is still listed"
    );
}

/// The agent proposes its own credential and keeps it before its first
/// `Hello`: when the `Welcome` of its enrollment is lost, the same `Hello`
/// again is admitted (and told the credential again), never refused for good;
/// a proposal for a name enrolled under another credential still is.
#[tokio::test]
async fn an_enrollment_whose_welcome_was_lost_is_admitted_again() {
    let f = populate().await;
    let pool = &f.pool;
    let proposal = "7e".repeat(32);
    let proposed = || NewCredential::proposed(&proposal).expect("well formed");

    let first = identity::admit(pool, "storm-01", "", true, &proposed()).await.unwrap();
    let Ok(Admission::Enrolled {
        host_id,
        how: Enrollment::New,
    }) = first
    else {
        panic!("{first:?}")
    };
    // The Welcome never arrived: the agent says hello again with what it stored.
    for _ in 0..2 {
        assert_eq!(
            identity::admit(pool, "storm-01", "", true, &proposed()).await.unwrap(),
            Ok(Admission::Enrolled {
                host_id,
                how: Enrollment::Repeated
            }),
        );
    }
    // The proposal is the credential now, and nothing else is.
    assert_eq!(
        identity::admit(pool, "storm-01", &proposal, false, &NewCredential::generate().unwrap())
            .await
            .unwrap(),
        Ok(Admission::Known { host_id })
    );
    let other = NewCredential::proposed(&"e7".repeat(32)).unwrap();
    assert_eq!(
        identity::admit(pool, "storm-01", "", true, &other).await.unwrap(),
        Err(Refusal::WrongCredential),
        "another agent's proposal does not take the name over"
    );
    let named = hosts::list(pool)
        .await
        .unwrap()
        .into_iter()
        .filter(|h| h.name == "storm-01")
        .count();
    assert_eq!(named, 1, "one host, enrolled once");

    // Reset by an operator: the agent's old credential is no longer enough, its next proposal enrolls it.
    identity::reset_credential(pool, "storm-01").await.unwrap();
    let next = NewCredential::proposed(&"3c".repeat(32)).unwrap();
    assert_eq!(
        identity::admit(pool, "storm-01", &proposal, true, &next).await.unwrap(),
        Ok(Admission::Enrolled {
            host_id,
            how: Enrollment::Claimed
        })
    );
    assert_eq!(
        identity::admit(pool, "storm-01", &proposal, true, &next).await.unwrap(),
        Ok(Admission::Enrolled {
            host_id,
            how: Enrollment::Repeated
        }),
        "the claim's Welcome lost too"
    );
    assert_eq!(
        identity::admit(pool, "storm-01", &proposal, false, &NewCredential::generate().unwrap())
            .await
            .unwrap(),
        Err(Refusal::WrongCredential),
        "the credential before the reset"
    );

    // Retired: not even its own proposal admits it.
    identity::retire(pool, "storm-01").await.unwrap();
    assert_eq!(
        identity::admit(pool, "storm-01", next.secret(), true, &next)
            .await
            .unwrap(),
        Err(Refusal::Retired)
    );
}

/// Two `Hello`s of one new name with the same proposal at once (an agent that
/// gave up waiting and dialled again): both are admitted, as one host.
#[tokio::test]
async fn two_enrollments_of_a_new_name_with_one_proposal_at_once_are_one_host() {
    let f = populate().await;
    let proposal = "a1".repeat(32);
    let (first, second) = (
        NewCredential::proposed(&proposal).unwrap(),
        NewCredential::proposed(&proposal).unwrap(),
    );
    let (a, b) = tokio::join!(
        identity::admit(&f.pool, "race-01", "", true, &first),
        identity::admit(&f.pool, "race-01", "", true, &second),
    );
    let mut hows: Vec<_> = [a.unwrap().unwrap(), b.unwrap().unwrap()]
        .into_iter()
        .map(|admission| match admission {
            Admission::Enrolled { host_id, how } => (host_id, how),
            Admission::Known { .. } => panic!("no credential was presented"),
        })
        .collect();
    hows.sort_by_key(|(_, how)| matches!(how, Enrollment::Repeated));
    assert_eq!(hows[0].0, hows[1].0, "one host");
    assert_eq!([hows[0].1, hows[1].1], [Enrollment::New, Enrollment::Repeated]);
}

#[tokio::test]
async fn a_hello_finds_its_host_as_stored_and_who_else_holds_it() {
    let f = populate().await;
    let pool = &f.pool;
    let me = Uuid::new_v4();
    let credential = NewCredential::generate().unwrap();
    assert_eq!(identity::lookup(pool, "look-01", me).await.unwrap(), None);
    let Ok(Admission::Enrolled { host_id, .. }) =
        identity::admit(pool, "look-01", "", true, &credential).await.unwrap()
    else {
        panic!("enrolled")
    };
    let found = identity::lookup(pool, "look-01", me).await.unwrap().unwrap();
    assert_eq!(found.host_id, host_id);
    assert!(found.admits(credential.secret()));
    assert!(!found.admits(""), "no credential");
    assert!(
        !found.admits(NewCredential::generate().unwrap().secret()),
        "another one"
    );
    assert!(found.labels.0.is_empty());
    assert_eq!(
        (found.paths, found.facts_hash, found.held_elsewhere_ms),
        (None, None, None)
    );

    // Its hello stored: labels, the hash of its facts, its paths.
    let stored = labels(&[("rack", "b7")]);
    let facts = bench_facts("6.1.0-18-amd64");
    hosts::upsert_host_with_facts(pool, "look-01", Some(&stored), &facts)
        .await
        .unwrap();
    capabilities::advertise(pool, host_id, &[Path::Accelerated], &[])
        .await
        .unwrap();
    let found = identity::lookup(pool, "look-01", me).await.unwrap().unwrap();
    assert_eq!(found.labels.0, stored);
    assert_eq!(found.facts_hash, Some(NormalisedFacts::new(&facts).hash.to_vec()));
    assert_eq!(found.paths, Some(strings(&["accelerated"])));

    // Held by another coordinator: for as long as its lease still lives; not by the one looking.
    let other = Holder {
        id: Uuid::new_v4(),
        name: "other/2".into(),
    };
    assert!(
        leases::acquire(pool, host_id, &other, 1, Duration::from_secs(60))
            .await
            .unwrap()
    );
    let left = identity::lookup(pool, "look-01", me)
        .await
        .unwrap()
        .unwrap()
        .held_elsewhere_ms;
    assert!(left.is_some_and(|ms| (55_000..=60_000).contains(&ms)), "{left:?}");
    let own = identity::lookup(pool, "look-01", other.id).await.unwrap().unwrap();
    assert_eq!(own.held_elsewhere_ms, None);

    // Retired: admitted by nothing.
    identity::retire(pool, "look-01").await.unwrap();
    let retired = identity::lookup(pool, "look-01", me).await.unwrap().unwrap();
    assert!(!retired.admits(credential.secret()));
}
