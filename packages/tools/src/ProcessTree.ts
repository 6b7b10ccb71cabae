/**
 * A program that lives as long as a scope (an MCP server, or what installs one), started as a
 * process tree rx can always end, by the mechanism of `shell` calls (`internal/process`): its own
 * process group, a marker variable that every process it starts inherits, and a cgroup of its
 * own where rx may create one (which also holds a process that left with `setsid` and cleared
 * its environment). When the scope closes, the program's stdin is closed, and what still runs
 * of the tree a moment later gets SIGTERM, then SIGKILL after the grace period, until none is
 * left; its cgroup is then removed.
 *
 * rx's own end: when rx exits (`process.exit`) or a signal that nothing else in rx handles would
 * end it (SIGTERM, SIGHUP, SIGINT), every live tree is killed at once before rx goes. Where rx
 * handles the signal itself (a goal running), it closes the scopes, which end the trees. Only
 * SIGKILL of rx leaves a tree running.
 */
import { Effect, Schema, type Scope } from "effect"
import { type ChildProcessByStdio, spawn as spawnChild } from "node:child_process"
import { randomBytes } from "node:crypto"
import type { Readable, Writable } from "node:stream"
import * as Limits from "./internal/limits.js"
import * as Process from "./internal/process.js"

/** The program could not be started (it is missing, a resource limit). */
export class SpawnFailed extends Schema.TaggedError<SpawnFailed>()("@rx/tools/SpawnFailed", { message: Schema.String }) {}

export interface Options {
  readonly file: string
  readonly args: ReadonlyArray<string>
  readonly cwd: string
  readonly env: Readonly<Record<string, string>>
  /** What the tree is for, in its cgroup's name (`rx-KIND-...`): letters only. */
  readonly kind: string
  /** After stdin is closed, how long the program may take to exit by itself (default 1 s). */
  readonly closeMs?: number
  /** After SIGTERM, how long before SIGKILL (default 2 s). */
  readonly graceMs?: number
  /** Processes of this name get no SIGTERM, only the final SIGKILL (bwrap: its death ends the sandbox at once). */
  readonly spareFromTerm?: string
}

/** A live process of a tree. */
export type Member = Process.Member

export interface Tree {
  /** The program: its stdin, stdout and stderr are pipes. */
  readonly child: ChildProcessByStdio<Writable, Readable, Readable>
  /** The marker every process of the tree carries in its environment (`PROCESS_TREE_OF_RX=...`). */
  readonly marker: string
  /** The live processes of the tree now. */
  readonly members: () => ReadonlyArray<Member>
  /** Whether the program itself has exited. */
  readonly exited: () => boolean
}

/**
 * The variable that marks a tree's processes. Not `RX_`-prefixed: a server is given none of rx's
 * own variables, and this one is no secret, only an identity.
 */
export const markerName = "PROCESS_TREE_OF_RX"

/** The trees alive now, each as it is killed when rx goes. */
const live = new Map<string, { readonly root: number; readonly marker: string; readonly cgroup: string | undefined }>()

const killAll = () => {
  for (const tree of live.values()) Process.killTree(tree.root, tree.marker, tree.cgroup)
}

const signals: ReadonlyArray<NodeJS.Signals> = ["SIGTERM", "SIGHUP", "SIGINT"]

/**
 * A signal that only this listener handles would end rx (Node's default): kill every tree, then
 * let the signal do what it would have done. Where rx has its own listener, it closes the scopes.
 */
const onSignal = (signal: NodeJS.Signals) => {
  if (process.listenerCount(signal) > 1) return
  killAll()
  uninstall()
  process.kill(process.pid, signal)
}

let installed = false

const install = () => {
  if (installed) return
  installed = true
  process.on("exit", killAll)
  for (const signal of signals) process.on(signal, onSignal)
}

const uninstall = () => {
  if (!installed) return
  installed = false
  process.off("exit", killAll)
  for (const signal of signals) process.off(signal, onSignal)
}

/** Resolve once `child` has exited, or after `ms`. */
const exitedWithin = (child: ChildProcessByStdio<Writable, Readable, Readable>, ms: number) =>
  Effect.async<void>((resume) => {
    if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
    const done = () => {
      clearTimeout(timer)
      resume(Effect.void)
    }
    const timer = setTimeout(done, ms)
    child.once("exit", done)
    return Effect.sync(() => {
      clearTimeout(timer)
      child.off("exit", done)
    })
  })

/** Remove a tree's cgroup once its last processes are reaped (five seconds at most; rx's next start sweeps what is left). */
const removeGroup = (dir: string): Effect.Effect<void> =>
  Effect.gen(function*() {
    for (let attempt = 0; attempt < 100; attempt++) {
      if (Limits.remove(dir)) return
      yield* Effect.sleep("50 millis")
    }
  })

/**
 * Start `file args` as a tree ended with the scope (see the module's description). Fails only
 * when it cannot be started at all.
 */
export const spawn = (options: Options): Effect.Effect<Tree, SpawnFailed, Scope.Scope> =>
  Effect.gen(function*() {
    const id = randomBytes(12).toString("hex")
    const marker = `${markerName}=${id}`
    const base = Limits.discoverOnce()
    if (base !== undefined) Limits.sweepOnce(base)
    const group = base === undefined ? undefined : Limits.create(base, Limits.groupName(options.kind, id), Number.MAX_SAFE_INTEGER)
    if (group !== undefined) yield* Effect.addFinalizer(() => removeGroup(group.dir))
    const [file, args] = group === undefined ? [options.file, options.args] : ["/bin/sh", Limits.joinArgs(group.dir, options.file, options.args)]
    const child = yield* Effect.acquireRelease(
      Effect.try({
        try: () =>
          spawnChild(file, [...args], {
            cwd: options.cwd,
            env: { ...options.env, [markerName]: id },
            detached: true,
            stdio: ["pipe", "pipe", "pipe"]
          }),
        catch: (error) => new SpawnFailed({ message: error instanceof Error ? error.message : String(error) })
      }).pipe(Effect.tap((child) => Effect.sync(() => {
        if (child.pid !== undefined) {
          live.set(id, { root: child.pid, marker, cgroup: group?.dir })
          install()
        }
      }))),
      (child) =>
        Effect.gen(function*() {
          // As MCP asks of a client: stdin closed first, then SIGTERM, then SIGKILL; here for
          // the whole tree, so what the program started (a daemon included) goes with it.
          yield* Effect.sync(() => child.stdin.destroy())
          yield* exitedWithin(child, options.closeMs ?? 1_000)
          const root = child.pid
          if (root !== undefined) yield* Effect.promise(() => Process.endTree(root, marker, options.graceMs ?? 2_000, options.spareFromTerm, group?.dir))
          child.stdout.destroy()
          child.stderr.destroy()
          live.delete(id)
          if (live.size === 0) uninstall()
        }).pipe(Effect.uninterruptible)
    )
    // A program that cannot be started reports it as an event, after `spawn` returned.
    const failed = yield* Effect.async<string | undefined>((resume) => {
      const onSpawn = () => {
        child.off("error", onError)
        resume(Effect.succeed(undefined))
      }
      const onError = (error: Error) => {
        child.off("spawn", onSpawn)
        resume(Effect.succeed(error.message))
      }
      child.once("spawn", onSpawn)
      child.once("error", onError)
    })
    if (failed !== undefined) return yield* new SpawnFailed({ message: failed })
    // Writing to a program that exited is its end, not rx's: the error is left to its exit.
    child.stdin.on("error", () => undefined)
    return {
      child,
      marker,
      members: () => (child.pid === undefined ? [] : Process.members(child.pid, marker, group?.dir)),
      exited: () => child.exitCode !== null || child.signalCode !== null
    }
  })
