//! identity: enrollment, credentials, reset and retirement.

use cipherfleet_coordinator::credential::IssuedCredential;
use cipherfleet_coordinator::db::identity::{self, Admission, Refusal};
use cipherfleet_coordinator::db::jobs::{self, JobStatus};
use cipherfleet_coordinator::db::{campaigns, hosts};

use super::fixture::*;

#[tokio::test]
async fn a_host_is_who_holds_its_credential_until_an_operator_says_otherwise() {
    let f = populate().await;
    let pool = &f.pool;
    let issue = || IssuedCredential::generate().unwrap();

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
        claimed: false,
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
            claimed: true
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
            claimed: true
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
