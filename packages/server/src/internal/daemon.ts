/**
 * The server's state, shared by its routes: the configuration, the workspace root, the hosts it
 * answers, the runs and the followers of events. Built once the HTTP server listens (its port is
 * known); at start it queues every open goal that does not wait for a person; `drain` stops it.
 */
import { FileSystem, HttpServer, Path } from "@effect/platform"
import { Goal, type LanguageModel, StateStore } from "@rx/kernel"
import { Delegate, HttpFetch, Toolbox } from "@rx/tools"
import { Context, Effect, Layer, Option } from "effect"
import type * as Config from "../Config.js"
import { InvalidConfig } from "../Config.js"
import { type Closing, makeClosing, makeSubscribers } from "./events.js"
import { hostsOf, originsOf } from "./guard.js"
import * as Runs from "./runs.js"
import { waitsForPerson } from "./views.js"
import * as Workspace from "./workspace.js"

export interface Service {
  readonly config: Config.Config
  /** The workspace root, as a real path. */
  readonly root: string
  /** Where the server listens. */
  readonly host: string
  readonly port: number
  /** The Host header values and Origins the server answers. */
  readonly hosts: ReadonlySet<string>
  readonly origins: ReadonlySet<string>
  readonly runs: Runs.Runs
  /** The tools of each workspace, built knowing where this server listens (their `http_fetch` never reaches it). */
  readonly toolbox: Toolbox.Service
  readonly subscribers: ReturnType<typeof makeSubscribers>
  /** Closed when the server starts shutting down: every event stream ends. */
  readonly closing: Closing
  /** Stop: refuse new goals, end the event streams, interrupt the runs (each records `Suspended(shutdown)`). */
  readonly drain: Effect.Effect<void>
}

export class Daemon extends Context.Tag("@rx/server/internal/Daemon")<Daemon, Service>() {}

type Requirements = HttpServer.HttpServer | StateStore.StateStore | Toolbox.Toolbox | FileSystem.FileSystem | Path.Path

/**
 * How the server gets a goal run until it ends or suspends: `here` runs it in this process; a
 * server of a cluster hands it to the workers instead (returning at once). Failures are the
 * run's own to log.
 */
export type Run<R> = (goalId: string, root: string) => Effect.Effect<void, never, R>

/** Run one goal here, with the server's model and the tools of its recorded workspace. */
export const here: Run<StateStore.StateStore | LanguageModel.LanguageModel | Toolbox.Toolbox | FileSystem.FileSystem | Path.Path> = (
  goalId,
  root
) =>
  Effect.gen(function*() {
    const state = yield* Goal.restore(goalId)
    if (state.seq === 0 || state.terminated !== null) return
    // A goal recorded for a cluster's workspace volume is the cluster's workers' to run (@rx/cluster).
    const placement = state.options.settings ?? {}
    if (placement.volume !== undefined) {
      return yield* Effect.logWarning(`goal ${goalId} is not run here: it was submitted to a cluster (workspace volume ${placement.volume}), whose workers run it`)
    }
    const workspace = yield* Workspace.recorded(root, placement.workspace)
    if (workspace === undefined) {
      return yield* Effect.logWarning(`goal ${goalId} is not run here: its workspace is not a folder inside ${root}`)
    }
    const toolbox = yield* Toolbox.Toolbox
    // A goal offered `delegate` runs its sub-goals in this run, each with the tools of its workspace.
    const result = yield* Delegate.drive(state, yield* toolbox.registry(workspace), {
      workspace,
      protection: toolbox.protection,
      workspaceTools: (folder) => Effect.mapError(toolbox.registry(folder), (error) => error.message)
    })
    yield* Effect.logInfo(`goal ${goalId} ${result.status} (${result.reason})`)
  }).pipe(
    Effect.scoped,
    Effect.catchAll((error) => Effect.logWarning(`goal ${goalId} stopped: ${error.message}`)),
    Effect.catchAllDefect((defect) => Effect.logError(`goal ${goalId} failed unexpectedly`, defect)),
    Effect.annotateLogs("goalId", goalId)
  )

export const layer = <R>(config: Config.Config, runGoal: Run<R>): Layer.Layer<Daemon, InvalidConfig, Requirements | R> =>
  Layer.scoped(
    Daemon,
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const context = yield* Effect.context<StateStore.StateStore | FileSystem.FileSystem | Path.Path | R>()
      const root = yield* Effect.gen(function*() {
        const real = yield* fs.realPath(path.resolve(config.workspace))
        return (yield* fs.stat(real)).type === "Directory" ? Option.some(real) : Option.none()
      }).pipe(
        Effect.orElseSucceed(() => Option.none<string>()),
        Effect.flatMap(Option.match({
          onNone: () => new InvalidConfig({ message: `the workspace root ${config.workspace} is not a folder` }),
          onSome: Effect.succeed
        }))
      )
      const server = yield* HttpServer.HttpServer
      const port = server.address._tag === "TcpAddress" ? server.address.port : config.port
      // The host as configured and as bound: a goal's tools may reach neither.
      const bound = server.address._tag === "TcpAddress" ? [server.address.hostname] : []
      const endpoints = [...new Set([config.host, ...bound])].map((host) => HttpFetch.endpoint(host, port))
      const toolbox = yield* (yield* Toolbox.Toolbox).serving(endpoints)
      const served = Context.add(context, Toolbox.Toolbox, toolbox)

      const run = (goalId: string): Effect.Effect<void> => Effect.provide(runGoal(goalId, root), served)

      const runs = yield* Runs.make({ concurrency: config.concurrency, maxQueued: config.maxQueued, run })
      const closing = makeClosing()

      /** Queue every open goal that can go on without a person, oldest first, unless another process runs it. */
      const resumeOpen = Effect.gen(function*() {
        const store = yield* StateStore.StateStore
        const open = yield* store.goals({ status: "open" })
        for (const summary of [...open].reverse()) {
          const { goalId } = summary
          // A sub-goal of an open goal goes on in its parent's run.
          if (summary.parent !== null && Option.exists(yield* store.goal(summary.parent), (parent) => parent.status === "open")) continue
          const state = yield* Goal.restore(goalId)
          if (waitsForPerson(state)) continue
          const where = state.options.settings?.workspace
          if ((yield* Workspace.recorded(root, where)) === undefined) {
            // Said, so an open goal left behind is not a mystery: another root, or rx resume, runs it.
            yield* Effect.logWarning(
              `goal ${goalId} is open but works in ${where ?? "a folder it did not record"}, outside this server's workspace root ${root}: it is not resumed here (rx resume ${goalId} runs it)`
            )
            continue
          }
          if (Option.isSome(yield* store.runner(goalId))) continue
          yield* runs.admit(goalId, { force: true }).pipe(Effect.ignore)
        }
      }).pipe(
        Effect.provide(context),
        Effect.catchAll((error) => Effect.logError(`the open goals could not be resumed: ${error.message}`))
      )
      if (config.resumeOnStart) yield* Effect.forkScoped(Effect.interruptible(resumeOpen))

      // Runs first (new goals are refused from the start), then the event streams end.
      const drain = runs.stop.pipe(
        Effect.timeoutOption(config.shutdownTimeoutMs),
        Effect.flatMap(Option.match({
          onNone: () => Effect.logWarning(`the runs did not stop within ${config.shutdownTimeoutMs} ms`),
          onSome: () => Effect.void
        })),
        Effect.ensuring(closing.close)
      )

      const hosts = hostsOf(config.host, port, config.allowedHosts)
      return Daemon.of({
        config,
        root,
        host: config.host,
        port,
        hosts,
        origins: originsOf(hosts),
        runs,
        toolbox,
        subscribers: makeSubscribers(config.maxSubscribers),
        closing,
        drain
      })
    })
  )
