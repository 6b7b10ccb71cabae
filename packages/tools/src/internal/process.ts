/**
 * Running a command as a process tree rx can always end. @effect/platform's Command falls
 * short here: it waits for the pipes to close (a backgrounded grandchild would hang the call)
 * and kills only the child, not its group or the processes that left it with `setsid`.
 *
 * The child is spawned detached (its own process group) with a marker variable in its
 * environment. The tree is the group, every descendant found in `/proc`, every process whose
 * environment carries the marker (which catches `setsid` grandchildren whose parent already
 * exited), and every member of the call's cgroup when it has one (which also catches a process
 * that cleared its environment). It is ended by SIGTERM, then SIGKILL after the grace period,
 * repeated until none is left: on timeout, when the command has written more output than
 * allowed, and when the command exits with processes still running. Interruption kills it with
 * SIGKILL at once.
 */
import { Effect } from "effect"
import { spawn, type ChildProcess } from "node:child_process"
import { randomBytes } from "node:crypto"
import { readdirSync, readFileSync } from "node:fs"
import type { Readable } from "node:stream"
import { HeadTail } from "./capture.js"
import * as Limits from "./limits.js"

export interface Options {
  readonly file: string
  readonly args: ReadonlyArray<string>
  readonly cwd: string
  /** Descriptors the child gets as its fds 3, 4, ... */
  readonly fds?: ReadonlyArray<number> | undefined
  readonly env: Readonly<Record<string, string>>
  readonly timeoutMs: number
  /** After the timeout: SIGTERM, then SIGKILL this many milliseconds later. */
  readonly graceMs: number
  /** Bytes kept of each stream. */
  readonly outputBytes: number
  /** Once stdout and stderr together pass this many bytes, the tree is ended. */
  readonly maxOutputBytes: number
  /** The call's cgroup folder, whose members belong to the tree. */
  readonly cgroup?: string | undefined
  /** The marker's value (random when not given); also names the call's cgroup. */
  readonly marker?: string | undefined
  /**
   * Processes of this name get no SIGTERM, only the final SIGKILL: a sandbox's own processes
   * (bwrap), whose death would kill the command without its grace period.
   */
  readonly spareFromTerm?: string
}

/** A live process of a tree. */
export interface Member {
  readonly pid: number
  readonly name: string
}

export interface Stream {
  readonly head: Buffer
  readonly tail: Buffer
  readonly total: number
  readonly dropped: number
}

export interface Result {
  readonly exitCode: number | null
  readonly signal: string | null
  readonly timedOut: boolean
  /** True when the tree was ended for writing more than `maxOutputBytes`. */
  readonly outputLimited: boolean
  readonly durationMs: number
  readonly stdout: Stream
  readonly stderr: Stream
}

/** The name of the variable that marks every process of one call. */
export const markerName = "RX_SHELL_CALL"

/** After the command exits, how long its pipes may take to drain once leftovers are killed. */
const drainMs = 2_000

const readProc = (path: string): string | undefined => {
  try {
    return readFileSync(path, "latin1")
  } catch {
    return undefined
  }
}

/**
 * The live processes of a tree: its process group, the descendants of `root`, every process
 * carrying the marker (and its descendants), and the members of `cgroup`. With no `root` (0),
 * only the marked processes and theirs. Zombies are dead already and are left out.
 */
export const members = (root: number, marker: string, cgroup?: string): ReadonlyArray<Member> => {
  let pids: Array<number>
  try {
    pids = readdirSync("/proc").filter((name) => /^\d+$/.test(name)).map(Number)
  } catch {
    return []
  }
  const children = new Map<number, Array<number>>()
  const found = new Set<number>()
  const zombies = new Set<number>()
  const names = new Map<number, string>()
  for (const pid of pids) {
    const stat = readProc(`/proc/${pid}/stat`)
    if (stat === undefined) continue
    // The command name may hold spaces and parentheses: fields start after the last ")".
    const [state, ppid, pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    names.set(pid, stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")))
    if (state === "Z" || state === "X") {
      zombies.add(pid)
      continue
    }
    const list = children.get(Number(ppid)) ?? []
    list.push(pid)
    children.set(Number(ppid), list)
    if (root > 0 && Number(pgrp) === root) found.add(pid)
    else if (readProc(`/proc/${pid}/environ`)?.split("\0").includes(marker) === true) found.add(pid)
  }
  if (cgroup !== undefined) for (const pid of Limits.members(cgroup)) found.add(pid)
  const queue = [...(root > 0 ? [root] : []), ...found]
  while (queue.length > 0) {
    const pid = queue.pop() ?? 0
    for (const child of children.get(pid) ?? []) {
      if (!found.has(child)) {
        found.add(child)
        queue.push(child)
      }
    }
  }
  found.delete(process.pid)
  for (const pid of zombies) found.delete(pid)
  return [...found].map((pid) => ({ pid, name: names.get(pid) ?? "" }))
}

const signal = (pid: number, sig: NodeJS.Signals): void => {
  try {
    process.kill(pid, sig)
  } catch {
    // Already gone.
  }
}

/**
 * Send a signal to every live process of the tree but those named `spare`; how many processes
 * the tree had.
 */
export const signalTree = (root: number, marker: string, sig: NodeJS.Signals, spare?: string, cgroup?: string): number => {
  // Never 0 or less: process.kill(-0) would signal rx's own process group.
  if (!(root > 0)) return 0
  const targets = members(root, marker, cgroup)
  if (spare === undefined) signal(-root, sig)
  for (const { name, pid } of targets) if (name !== spare) signal(pid, sig)
  return targets.length
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/**
 * End a tree: SIGTERM, then SIGKILL once `graceMs` have passed with processes still alive,
 * repeated until none is left (a process may fork while it is being killed).
 */
export const endTree = async (root: number, marker: string, graceMs: number, spare?: string, cgroup?: string): Promise<void> => {
  if (signalTree(root, marker, "SIGTERM", spare, cgroup) === 0) return
  const deadline = performance.now() + graceMs
  while (performance.now() < deadline) {
    await sleep(Math.min(50, Math.max(1, deadline - performance.now())))
    if (members(root, marker, cgroup).length === 0) return
  }
  for (let round = 0; round < 20; round++) {
    if (signalTree(root, marker, "SIGKILL", undefined, cgroup) === 0) return
    await sleep(10)
  }
}

/**
 * End every process carrying `marker` and their descendants (a call whose rx died: its group
 * leader may be gone): SIGTERM, SIGKILL after `graceMs`, until none is left.
 */
export const endMarked = async (marker: string, graceMs: number): Promise<void> => {
  const send = (sig: NodeJS.Signals) => {
    const targets = members(0, marker)
    for (const { pid } of targets) signal(pid, sig)
    return targets.length
  }
  if (send("SIGTERM") === 0) return
  const deadline = performance.now() + graceMs
  while (performance.now() < deadline) {
    await sleep(Math.min(50, Math.max(1, deadline - performance.now())))
    if (members(0, marker).length === 0) return
  }
  for (let round = 0; round < 20; round++) {
    if (send("SIGKILL") === 0) return
    await sleep(10)
  }
}

/** Kill the tree at once (interruption), repeating while processes remain. */
export const killTree = (root: number, marker: string, cgroup?: string): void => {
  for (let round = 0; round < 10; round++) {
    if (signalTree(root, marker, "SIGKILL", undefined, cgroup) === 0) return
  }
}

/** Spawning failed (the program is missing, a resource limit). */
export class SpawnFailed {
  readonly _tag = "SpawnFailed"
  constructor(readonly message: string) {}
}

const finish = (capture: HeadTail): Stream => {
  const { dropped, head, tail } = capture.result()
  return { head, tail, total: capture.total, dropped }
}

/**
 * Run to completion. Returns when the command exits (not when its pipes close), once whatever
 * it left running has been ended. Interrupting the Effect kills the tree at once.
 */
export const run = (options: Options): Effect.Effect<Result, SpawnFailed> => {
  const marker = `${markerName}=${options.marker ?? randomBytes(12).toString("hex")}`
  const half = Math.floor(options.outputBytes / 2)
  const stdout = new HeadTail(half, options.outputBytes - half)
  const stderr = new HeadTail(half, options.outputBytes - half)
  return Effect.acquireUseRelease(
    Effect.try({
      try: () =>
        spawn(options.file, [...options.args], {
          cwd: options.cwd,
          env: { ...options.env, [markerName]: marker.slice(markerName.length + 1) },
          detached: true,
          stdio: ["ignore", "pipe", "pipe", ...(options.fds ?? [])]
        }),
      catch: (error) => new SpawnFailed(error instanceof Error ? error.message : String(error))
    }),
    (child) =>
      Effect.async<Result, SpawnFailed>((resume) => {
        const started = performance.now()
        const root = child.pid ?? 0
        let settled = false
        let timedOut = false
        let outputLimited = false
        // Ending the tree, once started (by the timeout, too much output, or when the command exits).
        let ending: Promise<void> | undefined
        const end = () => (ending ??= endTree(root, marker, options.graceMs, options.spareFromTerm, options.cgroup))
        const received = (capture: HeadTail) => (chunk: Buffer) => {
          capture.push(chunk)
          if (!outputLimited && stdout.total + stderr.total > options.maxOutputBytes) {
            outputLimited = true
            end()
          }
        }
        child.stdout?.on("data", received(stdout))
        child.stderr?.on("data", received(stderr))
        const timer = setTimeout(() => {
          // Already being ended for its output: the timeout is not why it stopped.
          if (!outputLimited) timedOut = true
          end()
        }, options.timeoutMs)
        child.once("error", (error) => {
          clearTimeout(timer)
          if (settled) return
          settled = true
          resume(Effect.fail(new SpawnFailed(error.message)))
        })
        child.once("exit", (code, sig) => {
          if (settled) return
          settled = true
          const durationMs = Math.round(performance.now() - started)
          clearTimeout(timer)
          // The command is done: end what it left behind, so its pipes close, then drain them.
          end().then(() => drain(child)).then(() =>
            resume(Effect.succeed({
              exitCode: code,
              signal: sig,
              timedOut,
              outputLimited,
              durationMs,
              stdout: finish(stdout),
              stderr: finish(stderr)
            }))
          )
        })
        return Effect.sync(() => clearTimeout(timer))
      }),
    (child) =>
      Effect.sync(() => {
        if (child.pid !== undefined) killTree(child.pid, marker, options.cgroup)
        child.stdout?.destroy()
        child.stderr?.destroy()
      })
  )
}

/** Wait until both pipes are closed, `drainMs` at most. */
const drain = (child: ChildProcess): Promise<void> => {
  const closed = (stream: Readable | null) =>
    new Promise<void>((resolve) => {
      if (stream === null || stream.closed || stream.destroyed) return resolve()
      stream.once("close", () => resolve())
      stream.once("error", () => resolve())
    })
  return new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, drainMs)
    Promise.all([closed(child.stdout), closed(child.stderr)]).then(() => {
      clearTimeout(timer)
      resolve()
    })
  })
}
