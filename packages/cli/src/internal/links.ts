/** The fork links among a log's goals (`rx fork`), as `rx list` and `rx inspect` show them. */
import * as Fork from "@rx/host/Fork"
import type * as Goals from "@rx/host/Goals"
import * as Log from "@rx/host/Log"
import type { Settings } from "@rx/host"
import type { StateStore } from "@rx/kernel"
import type { FileSystem, Path } from "@effect/platform"
import { Effect } from "effect"

/** A fork's link, as `rx list --json` and `rx inspect --json` show it. */
export interface Link {
  readonly goalId: string
  readonly iteration: number
}

/**
 * The fork links among these goals of a log on this machine, both ways: each fork's origin, and
 * each goal's forks. None at a server (its goals' first events are not read here).
 */
export const links = (
  goals: Goals.Service,
  goalIds: ReadonlyArray<string>
): Effect.Effect<{ readonly origins: ReadonlyMap<string, Link>; readonly forks: ReadonlyMap<string, ReadonlyArray<Link>> }, Settings.UsageError | StateStore.StoreError, FileSystem.FileSystem | Path.Path> =>
  // No goals (as before any run, when there is no log yet): no links, and no log is opened.
  goals.where._tag !== "Log" || goalIds.length === 0
    ? Effect.succeed({ origins: new Map<string, Link>(), forks: new Map<string, ReadonlyArray<Link>>() })
    : Effect.map(Fork.forks(goalIds).pipe(Effect.provide(Log.layer(goals.where.db, "read"))), (forks) => {
      const origins = new Map<string, Link>()
      for (const [origin, list] of forks) for (const f of list) origins.set(f.goalId, { goalId: origin, iteration: f.iteration })
      return { origins, forks: forks as ReadonlyMap<string, ReadonlyArray<Link>> }
    })
