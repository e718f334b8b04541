//! How a failed query is answered, with the errors a real PostgreSQL gives: a
//! bug in our SQL (SQLSTATE class 42) or a row that does not fit its type is
//! an internal error; a value the database refuses to hold is the client's
//! mistake (400, `INVALID_ARGUMENT`); a connection the server ends is
//! "unavailable, retry".

use std::task::Poll;

use axum::http::StatusCode;
use axum::response::IntoResponse;
use cipherfleet_coordinator::grpc::db_status;
use cipherfleet_coordinator::store;
use cipherfleet_coordinator::web::WebError;
use cipherfleet_coordinator::web::api::ApiError;
use sqlx::{ConnectOptions, PgPool};

use crate::helpers::fresh_db;

/// The error PostgreSQL answers `sql` with, as the storage layer returns it.
async fn error_of(pool: &PgPool, sql: &'static str) -> store::Error {
    let outcome = sqlx::query(sql).execute(pool).await;
    store::Error::from(outcome.expect_err("the query was accepted"))
}

/// What a report page, an `/api/` table and a gRPC call answer for the error
/// `fail` provokes (once for each: `store::Error` is not `Clone`).
async fn answers(mut fail: impl AsyncFnMut() -> store::Error) -> (StatusCode, StatusCode, tonic::Code) {
    let page = WebError::from(fail().await).into_response().status();
    let api = ApiError(WebError::from(fail().await)).into_response().status();
    let grpc = db_status(fail().await).code();
    (page, api, grpc)
}

const BUG: (StatusCode, StatusCode, tonic::Code) = (
    StatusCode::INTERNAL_SERVER_ERROR,
    StatusCode::INTERNAL_SERVER_ERROR,
    tonic::Code::Internal,
);

#[tokio::test]
async fn a_query_naming_a_missing_column_is_a_bug_answered_with_500() {
    let pool = fresh_db().await;
    let e = error_of(&pool, "SELECT no_such_column FROM jobs").await;
    assert_eq!(e.sqlstate().as_deref(), Some("42703"), "{e}");
    assert!(e.is_query_bug(), "{e}");
    assert_eq!(
        answers(async || error_of(&pool, "SELECT no_such_column FROM jobs").await).await,
        BUG
    );
}

#[tokio::test]
async fn missing_tables_and_type_mismatches_are_bugs_too() {
    let pool = fresh_db().await;
    for (sql, sqlstate) in [
        ("SELECT 1 FROM no_such_table", "42P01"),
        ("UPDATE jobs SET attempts = now()", "42804"),
        ("SELECT no_such_function(1)", "42883"),
    ] {
        let e = error_of(&pool, sql).await;
        assert_eq!(e.sqlstate().as_deref(), Some(sqlstate), "{sql}: {e}");
        assert_eq!(answers(async || error_of(&pool, sql).await).await, BUG, "{sql}");
    }
}

#[tokio::test]
async fn a_row_that_does_not_decode_into_its_type_is_a_bug() {
    let pool = fresh_db().await;
    // An integer column read as text: the query ran, its row does not fit.
    let decode = async || {
        let outcome = sqlx::query_scalar::<_, String>("SELECT 1").fetch_one(&pool).await;
        store::Error::from(outcome.expect_err("an integer decoded as text"))
    };
    let e = decode().await;
    assert!(
        matches!(e, store::Error::Database(sqlx::Error::ColumnDecode { .. })),
        "{e:?}"
    );
    assert_eq!(e.sqlstate(), None);
    assert_eq!(answers(decode).await, BUG);
}

/// Values a client could send that PostgreSQL refuses: a NUL in text, `\u0000`
/// in `jsonb`, a number out of range, a violated check constraint. Retrying
/// cannot help and the database is not away: the answer says the value was bad.
#[tokio::test]
async fn a_value_the_database_refuses_is_bad_input_not_an_outage() {
    let pool = fresh_db().await;
    sqlx::query("CREATE TABLE figures (mb_s double precision CHECK (mb_s >= 0))")
        .execute(&pool)
        .await
        .expect("creating");
    let refused = async |sql: &'static str, value: &'static str| {
        let outcome = sqlx::query(sql).bind(value).execute(&pool).await;
        store::Error::from(outcome.expect_err("the value was stored"))
    };
    let cases = [
        ("SELECT $1::text", "host\0name", "22021"),
        ("SELECT $1::jsonb", r#"{"cpu": "\u0000"}"#, "22P05"),
        ("SELECT $1::float8 * 1e308", "10", "22003"),
        ("INSERT INTO figures VALUES ($1::float8)", "-1", "23514"),
    ];
    for (sql, value, sqlstate) in cases {
        let e = refused(sql, value).await;
        assert_eq!(e.sqlstate().as_deref(), Some(sqlstate), "{sql}: {e}");
        assert!(
            e.is_bad_input() && !e.is_query_bug() && !e.is_database_away(),
            "{sql}: {e}"
        );
        assert_eq!(
            answers(async || refused(sql, value).await).await,
            (
                StatusCode::BAD_REQUEST,
                StatusCode::BAD_REQUEST,
                tonic::Code::InvalidArgument
            ),
            "{sql}"
        );
        let status = db_status(refused(sql, value).await);
        assert!(status.message().contains("cannot store"), "{status:?}");
    }
    let check = refused("INSERT INTO figures VALUES ($1::float8)", "-1").await;
    assert!(check.refused_value().unwrap().contains("figures_mb_s_check"), "{check}");
}

#[tokio::test]
async fn a_connection_the_server_ends_is_unavailable_not_a_bug() {
    let pool = fresh_db().await;
    // A connection of its own (the pool would test and replace a dead one),
    // ended by the server as in a shutdown: it answers 57P01 (admin_shutdown).
    let ended = async || {
        let mut conn = pool.connect_options().connect().await.expect("connecting");
        let outcome = sqlx::query("SELECT pg_terminate_backend(pg_backend_pid())")
            .execute(&mut conn)
            .await;
        store::Error::from(outcome.expect_err("the connection outlived its backend"))
    };
    let e = ended().await;
    assert_eq!(e.sqlstate().as_deref(), Some("57P01"), "{e:?}");
    assert!(!e.is_query_bug(), "{e:?}");
    assert_eq!(
        answers(ended).await,
        (
            StatusCode::SERVICE_UNAVAILABLE,
            StatusCode::SERVICE_UNAVAILABLE,
            tonic::Code::Unavailable
        )
    );
}

/// A handshake whose agent gives up is dropped wherever it waits, also while
/// its `BEGIN` is on the wire. The connection must then not stay inside that
/// transaction: back in the pool, the next borrower's statements would run in
/// it, holding their locks and never committed (sqlx 0.9.0 did this, seen as
/// "there is already a transaction in progress" in a connect storm; 0.9.1
/// rolls it back).
#[tokio::test]
async fn a_transaction_dropped_while_its_begin_is_on_the_wire_is_rolled_back() {
    let pool = fresh_db().await;
    sqlx::query("CREATE TABLE written (n int)")
        .execute(&pool)
        .await
        .expect("creating");
    // Polled once, so BEGIN is sent and its answer not yet read; then dropped.
    // A fast server can answer within that one poll (seen once in CI): then the
    // case did not happen, and it is tried again on a new connection.
    let mut attempts = 0;
    let mut conn = loop {
        attempts += 1;
        let mut conn = pool.connect_options().connect().await.expect("connecting");
        let answered = {
            let mut begin = std::pin::pin!(sqlx::Connection::begin(&mut conn));
            std::future::poll_fn(|cx| Poll::Ready(begin.as_mut().poll(cx).is_ready())).await
        };
        if !answered {
            break conn;
        }
        assert!(
            attempts < 50,
            "BEGIN was answered within its first poll {attempts} times"
        );
    };
    // A statement of its own on that connection, as the next borrower's would be.
    sqlx::query("INSERT INTO written VALUES (1)")
        .execute(&mut conn)
        .await
        .expect("inserting");
    let seen: i64 = sqlx::query_scalar("SELECT count(*) FROM written")
        .fetch_one(&pool)
        .await
        .expect("counting");
    assert_eq!(seen, 1, "the insert ran inside the dropped transaction, uncommitted");
}
