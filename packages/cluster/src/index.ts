/**
 * @rx/cluster: rx goals spread over worker processes with @effect/cluster. A goal is an Entity
 * keyed by its id whose one persisted message, `Drive`, runs `Runner.resume`; workers are
 * socket runners sharing the Postgres log's database for the cluster's messages and shard locks,
 * so a dead worker's goals resume on the others within the configured failover time.
 */
export * as Config from "./Config.js"
export * as GoalEntity from "./GoalEntity.js"
export * as Workers from "./Workers.js"
export * as Workspaces from "./Workspaces.js"
