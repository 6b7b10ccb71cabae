/**
 * The goals a command works on, wherever they are: in a log on this machine (`layerLocal`), at an
 * `rx serve` (`layerHttp`, through `@rx/server`'s typed `Client`), or run by a cluster's workers
 * (`layerCluster`). Each command is written once against this service; `layer` picks the place
 * the settings name (`--server` or `RX_SERVER`, else `--cluster`, else the log of `--db`, `RX_DB`
 * or the default). What only some commands need (the HTTP client, the cluster, the model and tool
 * Layers of a run) is loaded when used.
 */
import { Context, Effect, Layer, Option } from "effect"
import { makeLocal } from "./internal/local.js"
import type { Service } from "./internal/service.js"
import * as Log from "./Log.js"
import * as Settings from "./Settings.js"
import { UsageError } from "./Settings.js"

export type { Decided, Decision, Failure, Followed, Hooks, Listed, ResumeRequest, RunRequest, Service, Starting, Where } from "./internal/service.js"
export { observed } from "./internal/service.js"
export { makeLocal }

export class Goals extends Context.Tag("@rx/host/Goals")<Goals, Service>() {}

// ---------------------------------------------------------------------------------------------
// An rx serve
// ---------------------------------------------------------------------------------------------

/** The server the settings name: `--server`, else `RX_SERVER`; none for a local log. */
export const serverOf = (given: Settings.Given) =>
  Effect.gen(function*() {
    const found = given.server ?? (yield* Settings.fromEnv(["server"])).server?.value
    return Option.fromNullable(found)
  })

/** How a command reaches its goals besides its settings: through a cluster's workers (`--cluster`), with the failover time they use. */
export interface Reach {
  readonly cluster?: boolean
  readonly failover?: Option.Option<number>
}

/** The goals at the server the settings name, else those a cluster's workers run, else in the log they name. */
export const make = (given: Settings.Given, reach: Reach = {}) =>
  reach.cluster !== true && reach.failover !== undefined && Option.isSome(reach.failover)
    ? new UsageError({ message: "--failover applies with --cluster" })
    : Effect.flatMap(
    serverOf(given),
    Option.match({
      onNone: () =>
        Effect.flatMap(Log.database(Settings.dbFlag(given)), (db) =>
          reach.cluster === true ? makeCluster(db, reach.failover ?? Option.none()) : makeLocal(db)),
      onSome: (url) => reach.cluster === true ? new UsageError({ message: "--cluster and --server name two places: give one" }) : makeHttp(url, given)
    })
    )

export const layer = (given: Settings.Given, reach: Reach = {}) => Layer.effect(Goals, make(given, reach))
export const layerLocal = (db: Settings.Database) => Layer.effect(Goals, makeLocal(db))
export const layerHttp = (url: string, given: Settings.Given = {}) => Layer.effect(Goals, makeHttp(url, given))
export const layerCluster = (db: Settings.Database, failover: Option.Option<number> = Option.none()) => Layer.effect(Goals, makeCluster(db, failover))

/** The goals of the rx serve at `url`, with the token the settings name (`RX_TOKEN`, or the token file of a server on this machine). */
export const makeHttp = (url: string, given: Settings.Given) => Effect.flatMap(Effect.promise(() => import("./internal/http.js")), (m) => m.makeHttp(url, given))

/**
 * The goals of a cluster's Postgres log (`rx worker`s run them): `run` and `resume` record the
 * goal and hand it to the workers, then follow its log; the rest is `makeLocal`'s.
 */
export const makeCluster = (db: Settings.Database, failover: Option.Option<number>) =>
  Effect.flatMap(Effect.promise(() => import("./internal/cluster.js")), (m) => m.makeCluster(db, failover))
