-- A coordinator restarted where it ran before takes its own leases back at
-- once, also when it comes back in a new PID namespace (a container restarted
-- in its pod): a listening address is held by one live process at a time in a
-- network namespace, so a registered coordinator of the same boot, network
-- namespace and gRPC listening address as one that just bound it is dead.
-- NULL: unknown, never judged by it.
ALTER TABLE coordinators
    ADD COLUMN net_namespace bigint,
    ADD COLUMN grpc_listen text;
CREATE INDEX coordinators_listener ON coordinators (boot_id, net_namespace, grpc_listen);
