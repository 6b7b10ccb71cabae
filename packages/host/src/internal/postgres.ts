/**
 * The Postgres log (`--db postgres://...`) and the cluster of workers on it. @rx/store-pg and
 * @rx/cluster are loaded only when a command names a Postgres log, so every other command starts
 * without them.
 */
import type { Workspaces } from "@rx/cluster"
import type { StateStore } from "@rx/kernel"
import { Effect, Layer } from "effect"
import type * as Settings from "../Settings.js"
import { UsageError } from "../Settings.js"

const load = <A>(name: string, module: () => Promise<A>) =>
  Effect.tryPromise({
    try: module,
    catch: (error) => new UsageError({ message: `a Postgres log needs ${name}, which did not load: ${error instanceof Error ? error.message : String(error)}` })
  })

export const storePg = load("@rx/store-pg", () => import("@rx/store-pg"))
export const cluster = load("@rx/cluster", () => import("@rx/cluster"))

/** A failure of the Postgres log or the cluster as one line, without the URL's password. */
export const refused = (error: { readonly message: string }) => new UsageError({ message: error.message })

/** The Postgres log of `db` (migrated when it opens). */
export const log = (db: Settings.Database): Layer.Layer<StateStore.StateStore, UsageError> =>
  Layer.unwrapEffect(Effect.map(storePg, ({ PgStore }) => PgStore.layer({ url: db.file, applicationName: "rx" }).pipe(Layer.mapError(refused))))

/** A volume with its id's file, which the tools must not reach. */
export const withFile = <V extends { readonly root: string }>(workspaces: typeof Workspaces, found: V) => ({ ...found, file: `${found.root}/${workspaces.volumeFile}` })

/** The volume of a cluster's workspace root (made if it has none), with its id's file. */
export const volume = (workspaces: typeof Workspaces, root: string) =>
  Effect.map(Effect.mapError(workspaces.volume(root), refused), (found) => withFile(workspaces, found))

/**
 * A goal submitted to a cluster records its workspace's volume: it runs here only in a folder of
 * that volume, never in a same-named folder of another disk.
 */
export const onVolume = (goalId: string, id: string, workspace: string) =>
  Effect.gen(function*() {
    const { Workspaces } = yield* cluster
    const found = yield* Effect.mapError(Workspaces.find(workspace), refused)
    if (found?.id === id) return
    return yield* new UsageError({
      message: `goal ${goalId} was submitted to a cluster for a folder of workspace volume ${id}, and ${workspace} is ${
        found === undefined ? "on no rx volume" : `on volume ${found.id}`
      } here: resume it where that volume is mounted (the cluster's workers do)`
    })
  })
