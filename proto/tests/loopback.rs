//! The generated client and server talking over a real TCP socket on
//! 127.0.0.1, through tonic's HTTP/2 transport: what the agent and the
//! coordinator will do, minus the business logic.

use std::net::SocketAddr;

use cipherfleet_proto::PROTOCOL_VERSION;
use cipherfleet_proto::v1::agent_service_client::AgentServiceClient;
use cipherfleet_proto::v1::agent_service_server::{AgentService, AgentServiceServer};
use cipherfleet_proto::v1::{
    AgentMessage, Capabilities, CoordinatorMessage, HostFacts, Label, Measurement, ResultAck, Welcome, agent_message,
    coordinator_message,
};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Request, Response, Status, Streaming};

const HEARTBEAT_INTERVAL_MS: u32 = 5_000;

/// A minimal coordinator: admits an agent that says `Hello` with our protocol
/// version, acknowledges every result, and hands each result to the test.
struct TestCoordinator {
    results: mpsc::UnboundedSender<AgentMessage>,
}

#[tonic::async_trait]
impl AgentService for TestCoordinator {
    type SessionStream = ReceiverStream<Result<CoordinatorMessage, Status>>;

    async fn session(
        &self,
        request: Request<Streaming<AgentMessage>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        let mut inbound = request.into_inner();
        let hello = match inbound.message().await?.and_then(|m| m.body) {
            Some(agent_message::Body::Hello(hello)) => hello,
            Some(_) => return Err(Status::invalid_argument("first message must be Hello")),
            None => {
                return Err(Status::invalid_argument(
                    "first message must be Hello, got an AgentMessage with no body",
                ));
            }
        };
        if hello.protocol_version != PROTOCOL_VERSION {
            return Err(Status::failed_precondition(format!(
                "protocol version {} not supported",
                hello.protocol_version
            )));
        }

        let (outbound, replies) = mpsc::channel(8);
        let welcome = coordinator_message::Body::Welcome(Welcome {
            agent_id: format!("agent-{}", hello.name),
            heartbeat_interval_ms: HEARTBEAT_INTERVAL_MS,
            credential: String::new(),
        });
        outbound
            .send(Ok(CoordinatorMessage { body: Some(welcome) }))
            .await
            .expect("receiver is still in this function");

        // Reader task: runs until the agent closes its side or the reply
        // stream is gone.
        let results = self.results.clone();
        tokio::spawn(async move {
            while let Ok(Some(message)) = inbound.message().await {
                let Some(agent_message::Body::JobResult(result)) = &message.body else {
                    continue;
                };
                let ack = coordinator_message::Body::ResultAck(ResultAck {
                    job_id: result.job_id.clone(),
                    rejected: String::new(),
                    attempt_id: result.attempt_id.clone(),
                });
                let _ = results.send(message.clone());
                let reply = CoordinatorMessage { body: Some(ack) };
                if outbound.send(Ok(reply)).await.is_err() {
                    break;
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(replies)))
    }
}

/// A coordinator serving on a port-0 socket, and what the test needs to use and stop it.
struct TestApp {
    address: SocketAddr,
    results: mpsc::UnboundedReceiver<AgentMessage>,
    shutdown: oneshot::Sender<()>,
    server: JoinHandle<Result<(), tonic::transport::Error>>,
}

impl TestApp {
    async fn client(&self) -> AgentServiceClient<Channel> {
        let channel = Endpoint::from_shared(format!("http://{}", self.address))
            .expect("valid URI")
            .connect()
            .await
            .expect("connect to the test coordinator");
        AgentServiceClient::new(channel)
    }

    async fn stop(self) {
        self.shutdown.send(()).expect("server still running");
        self.server
            .await
            .expect("server task did not panic")
            .expect("server stopped cleanly");
    }
}

async fn spawn_app() -> TestApp {
    // Bound before the server starts, so connecting needs no readiness wait.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("local address");
    let (results_tx, results) = mpsc::unbounded_channel();
    let (shutdown, stopped) = oneshot::channel::<()>();
    let service = AgentServiceServer::new(TestCoordinator { results: results_tx });
    let server = tokio::spawn(Server::builder().serve_with_incoming_shutdown(
        service,
        TcpListenerStream::new(listener),
        async {
            let _ = stopped.await;
        },
    ));
    TestApp {
        address,
        results,
        shutdown,
        server,
    }
}

fn hello(name: &str, protocol_version: u32) -> AgentMessage {
    let hello = cipherfleet_proto::v1::Hello {
        protocol_version,
        enrollment_token: "test-token".into(),
        facts: Some(HostFacts {
            hostname: name.into(),
            arch: "x86_64".into(),
            cpu_family: Some(6),
            features_usable: vec!["aes".into(), "pclmulqdq".into()],
            ..Default::default()
        }),
        capabilities: Some(Capabilities {
            paths: vec!["accelerated".into(), "software".into()],
            max_threads: 4,
            agent_version: "0.1.0".into(),
        }),
        labels: vec![Label {
            key: "rack".into(),
            value: "b7".into(),
        }],
        name: name.into(),
        running_job_id: String::new(),
        spooled_job_ids: vec![],
        credential: String::new(),
        running_attempt_id: String::new(),
        proposed_credential: String::new(),
    };
    AgentMessage {
        body: Some(agent_message::Body::Hello(hello)),
    }
}

#[tokio::test]
async fn hello_is_welcomed_and_results_are_acknowledged_over_a_real_socket() {
    let mut app = spawn_app().await;
    let mut client = app.client().await;

    let (to_coordinator, outbound) = mpsc::channel(8);
    to_coordinator.send(hello("host-a", PROTOCOL_VERSION)).await.unwrap();
    let mut inbound = client
        .session(ReceiverStream::new(outbound))
        .await
        .expect("session accepted")
        .into_inner();

    let first = inbound.message().await.expect("stream ok").expect("a reply");
    assert_eq!(
        first.body,
        Some(coordinator_message::Body::Welcome(Welcome {
            agent_id: "agent-host-a".into(),
            heartbeat_interval_ms: HEARTBEAT_INTERVAL_MS,
            credential: String::new(),
        }))
    );

    // After the handshake the stream carries traffic both ways.
    let measurement = Measurement {
        measurement_json: r#"{"schema":"cipherfleet.measurement/2","throughput_mb_s":4321.5,"cv":0.012,"sample_throughputs_mb_s":[4300.0,4321.5,4400.25],"backends":{"aes":"aes-ni","ghash":"clmul"}}"#.into(),
    };
    let result = AgentMessage {
        body: Some(agent_message::Body::JobResult(cipherfleet_proto::v1::JobResult {
            job_id: "job-1".into(),
            measurement: Some(measurement),
            attempt_id: "attempt-1".into(),
        })),
    };
    to_coordinator.send(result.clone()).await.unwrap();

    let ack = inbound.message().await.expect("stream ok").expect("a reply");
    assert_eq!(
        ack.body,
        Some(coordinator_message::Body::ResultAck(ResultAck {
            job_id: "job-1".into(),
            rejected: String::new(),
            attempt_id: "attempt-1".into(),
        }))
    );
    let received = app.results.recv().await.expect("coordinator saw the result");
    assert_eq!(received, result, "every field survives the wire");

    // The agent hangs up: the coordinator's side of the stream ends too.
    drop(to_coordinator);
    assert!(inbound.message().await.expect("clean end").is_none());
    drop(client);
    app.stop().await;
}

#[tokio::test]
async fn session_opened_without_hello_is_rejected_with_invalid_argument() {
    let app = spawn_app().await;
    let mut client = app.client().await;

    let empty = AgentMessage { body: None };
    let status = client
        .session(tokio_stream::iter([empty]))
        .await
        .expect_err("an empty first message is refused");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(status.message().contains("no body"), "{}", status.message());

    drop(client);
    app.stop().await;
}
