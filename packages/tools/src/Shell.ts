/**
 * `shell {command, timeout_ms?}`: run a command with `/bin/sh -c` in the workspace root.
 *
 * - Sandboxed by bubblewrap per the config's mode (see `Sandbox`); the mode is part of every
 *   output.
 * - Timeout (`timeout_ms`, default `shellTimeoutMs` = 60 s, at most `shellMaxTimeoutMs` = 600 s):
 *   the whole process tree gets SIGTERM, then SIGKILL after `shellGraceMs` (default 2 s); this
 *   includes processes that left the group with `setsid`.
 * - The call returns when the command exits, not when its pipes close: whatever it left running
 *   (`sleep 30 &`) is ended then, the same way (SIGTERM, SIGKILL after the grace period). A shell
 *   call cannot leave a daemon behind. Interrupting the call kills the tree with SIGKILL at once.
 * - stdout and stderr are each capped at `shellOutputBytes` (default 32 KiB): the first and last
 *   halves are kept, and the bytes dropped between them are counted. Memory stays bounded
 *   whatever the command prints. Once both streams together pass `shellMaxOutputBytes` (default
 *   16 MiB) the tree is ended like on a timeout and the output says `output_limited`: `yes` does
 *   not burn a CPU until the timeout.
 * - Resource limits (see `internal/limits`): tasks (`shellMaxProcesses`, 1024), private memory
 *   per process (`shellMaxMemoryBytes`, 4 GiB), CPU seconds per process (`shellMaxCpuSeconds`,
 *   600), file size (`shellMaxFileBytes`, 1 GiB), no core dumps; what was enforced is in every
 *   output's `limits`.
 * - The workspace's protected paths (`.git` by default) are read-only in the sandbox and its
 *   hidden paths (rx's database, when inside) can be neither read nor written.
 * - The environment is reduced to `shellEnv` (names), and a name that looks secret (KEY, TOKEN,
 *   SECRET, PASSWORD, CREDENTIAL, AUTH, COOKIE, SESSION) is never passed, even if listed.
 * - A non-zero exit is not an error: exit code, signal, timeout, duration and truncation are
 *   the output.
 */
import { Tool } from "@rx/kernel"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { createHash, randomBytes } from "node:crypto"
import { ToolsConfig } from "./Config.js"
import * as Limits from "./internal/limits.js"
import * as Notes from "./internal/notes.js"
import * as Process from "./internal/process.js"
import * as Text from "./internal/text.js"
import * as Tree from "./internal/tree.js"
import * as Sandbox from "./Sandbox.js"
import { Workspace } from "./Workspace.js"

export const Input = Schema.Struct({
  command: Schema.String.pipe(Schema.minLength(1)).annotations({
    description: "Shell command, run with /bin/sh -c in the workspace root."
  }),
  timeout_ms: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.positive())).annotations({
    description: "Milliseconds before the command and everything it started are killed. Default 60000."
  })
})
export type Input = typeof Input.Type

/** The resource limits a call ran under; null for one that could not be enforced. */
export const AppliedLimits = Schema.Struct({
  /** Tasks (processes and threads) the call may have at once. */
  max_processes: Schema.NullOr(Schema.Int),
  /** What enforces `max_processes`: a cgroup's `pids.max`, or RLIMIT_NPROC. */
  processes_limited_by: Schema.NullOr(Schema.Literal("cgroup", "rlimit")),
  /** Private writable memory per process (RLIMIT_DATA). */
  max_memory_bytes: Schema.NullOr(Schema.Int),
  /** CPU seconds per process (RLIMIT_CPU). */
  max_cpu_seconds: Schema.NullOr(Schema.Int),
  /** Largest file a process may write (RLIMIT_FSIZE). */
  max_file_bytes: Schema.NullOr(Schema.Int)
})
export type AppliedLimits = typeof AppliedLimits.Type

export const Output = Schema.Struct({
  command: Schema.String,
  /** Exit code; null when the command was ended by a signal. */
  exit_code: Schema.NullOr(Schema.Int),
  /** The signal that ended it, such as "SIGKILL"; null when it exited. */
  signal: Schema.NullOr(Schema.String),
  /** True when the timeout ended it. */
  timed_out: Schema.Boolean,
  duration_ms: Schema.Int,
  /** Kept output; when bytes were dropped, a marker line stands between head and tail. */
  stdout: Schema.String,
  stderr: Schema.String,
  /** Bytes the command wrote to each stream in all. */
  stdout_bytes: Schema.Int,
  stderr_bytes: Schema.Int,
  /** Bytes dropped from the middle of each stream. */
  stdout_dropped_bytes: Schema.Int,
  stderr_dropped_bytes: Schema.Int,
  /** True when either stream was cut. */
  truncated: Schema.Boolean,
  /** True when the command was stopped for writing more than `shellMaxOutputBytes`. */
  output_limited: Schema.Boolean,
  /** The resource limits it ran under. */
  limits: AppliedLimits,
  /** How the command was isolated. */
  sandbox: Schema.Literal("bwrap", "none"),
  cwd: Schema.String,
  /**
   * Protected paths (relative to the workspace) that did not exist and that the command created:
   * each was moved aside when the call ended, to `<path>.refused-by-rx-<tag>`.
   */
  moved_aside: Schema.optional(Schema.Array(Schema.String)),
  /**
   * Sandboxed: whether the command changed anything in the workspace, the only place it can
   * write. Absent when that cannot be told (no sandbox, or a workspace too large to compare).
   */
  workspace_changed: Schema.optional(Schema.Boolean)
})
export type Output = typeof Output.Type

export interface Service {
  /** The sandbox decided when the tools were built. */
  readonly sandbox: Sandbox.Sandbox
  /**
   * Run a command; only a refusal or a broken environment fails. With `callId`, its processes
   * carry a marker derived from it, so `recover` finds them after a crash.
   */
  readonly run: (command: string, timeoutMs?: number, callId?: string) => Effect.Effect<Output, Tool.ToolError>
  /**
   * After rx stopped during the call `callId` (a crash, a kill): end whatever of it still runs
   * (its timeout died with rx). Whether it took effect stays unknown.
   */
  readonly recover: (callId: string) => Effect.Effect<void>
}

/** The marker of a call's processes: derived from its id, so a later rx can find them. */
export const markerOf = (callId: string): string => createHash("sha256").update(`rx-shell-call:${callId}`).digest("hex").slice(0, 24)

export class Shell extends Context.Tag("@rx/tools/Shell")<Shell, Service>() {}

/** Names never passed to a command, whatever the allow-list says. */
export const secretName = /KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE/i

/** The environment a command gets: the allowed, non-secret variables rx has. */
export const environment = (
  allow: ReadonlyArray<string>,
  source: Readonly<Record<string, string | undefined>>,
  sandboxed: boolean
): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const name of allow) {
    const value = source[name]
    if (value !== undefined && !secretName.test(name)) env[name] = value
  }
  env["PATH"] ??= "/usr/local/bin:/usr/bin:/bin"
  // Inside the sandbox only /tmp is private and writable outside the workspace.
  if (sandboxed) env["HOME"] = "/tmp"
  return env
}

const render = (stream: Process.Stream): string =>
  stream.dropped === 0
    ? Text.decodeLenient(Buffer.concat([stream.head, stream.tail]))
    : `${Text.decodeLenient(stream.head)}\n[... ${stream.dropped} bytes dropped ...]\n${Text.decodeLenient(stream.tail)}`

/**
 * Remove a call's cgroup once its last processes are reaped (five seconds at most; one still
 * held then is removed by the next rx's sweep, once this one is gone).
 */
const removeGroup = (dir: string): Effect.Effect<void> =>
  Effect.gen(function*() {
    for (let attempt = 0; attempt < 100; attempt++) {
      if (Limits.remove(dir)) return
      yield* Effect.sleep("50 millis")
    }
  })

/** A shell runner for the workspace, with the sandbox decided now. */
export const make: Effect.Effect<Service, Sandbox.SandboxUnavailable, ToolsConfig | Workspace> = Effect.gen(function*() {
  const config = yield* ToolsConfig
  const workspace = yield* Workspace
  const sandbox = yield* Sandbox.resolve(config.sandbox, workspace.root, config.bwrapPath)
  const cgroups = sandbox._tag === "Unavailable" ? undefined : Limits.discoverOnce()
  // The empty groups of rx processes that are gone (killed before they could remove them).
  if (cgroups !== undefined) Limits.sweepOnce(cgroups)
  const guards = Sandbox.guardsOf(workspace.root, config.protectedPaths, config.hiddenPaths)
  const uid = process.getuid?.()

  const run = (command: string, timeoutMs?: number, callId?: string): Effect.Effect<Output, Tool.ToolError> =>
    Effect.gen(function*() {
      if (sandbox._tag === "Unavailable") {
        return yield* Tool.ToolError.fatal(`shell calls are refused: no sandbox. ${sandbox.reason}`, {
          sandbox: config.sandbox
        })
      }
      const timeout = timeoutMs ?? config.shellTimeoutMs
      if (timeout > config.shellMaxTimeoutMs) {
        return yield* Tool.ToolError.recoverable(
          `timeout_ms ${timeout} is above the limit of ${config.shellMaxTimeoutMs}; ask for less`
        )
      }
      const sandboxed = sandbox._tag === "Bwrap"
      const env = environment(config.shellEnv, process.env, sandboxed)
      const marker = callId === undefined ? randomBytes(12).toString("hex") : markerOf(callId)
      const limits = Limits.effective({
        processes: config.shellMaxProcesses,
        memoryBytes: config.shellMaxMemoryBytes,
        cpuSeconds: config.shellMaxCpuSeconds,
        fileBytes: config.shellMaxFileBytes
      })
      // RLIMIT_NPROC: ignored for root; per sandbox in bwrap's user namespace; else per user.
      const nproc = uid === undefined || uid === 0 || sandbox.prlimit === undefined
        ? undefined
        : sandboxed && !sandbox.setuid
        ? limits.processes
        : Limits.userTasks(uid) + limits.processes
      const limited = sandbox.prlimit !== undefined
      const shell = ["/bin/sh", "-c", command]
      const argv = sandbox.prlimit === undefined ? shell : [sandbox.prlimit, ...Limits.prlimitArgs(limits, nproc), "--", ...shell]
      let file = argv[0] ?? "/bin/sh"
      let args = argv.slice(1)
      let fds: ReadonlyArray<number> = []
      let cwd = workspace.root
      // Where the workspace is scanned for changes: the checked descriptor when sandboxed.
      let scanned = workspace.root
      let moved: ReadonlyArray<string> = []
      return yield* Effect.scoped(Effect.gen(function*() {
        const group = cgroups === undefined ? undefined : Limits.create(cgroups, Limits.groupName("shell", marker), limits.processes)
        if (group !== undefined) yield* Effect.addFinalizer(() => removeGroup(group.dir))
        if (sandboxed) {
          // The folder checked now is the one mounted: bwrap binds this descriptor, not the path.
          const rootFd = yield* workspace.openRoot.pipe(Effect.mapError((error) => Tool.ToolError.fatal(error.message)))
          const held = yield* Sandbox.hold(workspace.root, guards, rootFd).pipe(
            Effect.mapError((why) => Tool.ToolError.fatal(`shell calls are refused: ${why}`))
          )
          if (held.missing.length > 0) {
            Notes.write(marker, { root: workspace.root, identity: workspace.identity, missing: held.missing })
            yield* Effect.addFinalizer(() =>
              Effect.sync(() => {
                moved = Sandbox.moveAside(rootFd, held.missing, marker.slice(0, 8))
                Notes.remove(marker)
              })
            )
          }
          fds = held.fds
          file = sandbox.path
          cwd = "/"
          // The trailing slash resolves the descriptor's link to the folder itself.
          scanned = `/proc/self/fd/${rootFd}/`
          const tmpBytes = sandbox.tmpfsSize ? limits.memoryBytes : undefined
          args = [...Sandbox.bwrapArgs(workspace.root, argv, held.args, tmpBytes)]
        }
        if (group !== undefined) {
          args = [...Limits.joinArgs(group.dir, file, args)]
          file = "/bin/sh"
        }
        // The workspace before and after: a sandboxed command that changed nothing did nothing.
        const before = sandboxed ? Tree.fingerprint(scanned) : undefined
        const result = yield* Process.run({
          file,
          args,
          cwd,
          fds,
          env,
          timeoutMs: timeout,
          graceMs: config.shellGraceMs,
          outputBytes: config.shellOutputBytes,
          maxOutputBytes: config.shellMaxOutputBytes,
          marker,
          cgroup: group?.dir,
          ...(sandboxed ? { spareFromTerm: "bwrap" } : {})
        }).pipe(
          Effect.mapError((error) => Tool.ToolError.fatal(`the command could not be started: ${error.message}`))
        )
        const after = before === undefined ? undefined : Tree.fingerprint(scanned)
        const processesBy = group?.limitsTasks === true ? "cgroup" as const : nproc !== undefined ? "rlimit" as const : null
        return (moved: ReadonlyArray<string>): Output => ({
          command,
          exit_code: result.exitCode,
          signal: result.signal,
          timed_out: result.timedOut,
          duration_ms: result.durationMs,
          stdout: render(result.stdout),
          stderr: render(result.stderr),
          stdout_bytes: result.stdout.total,
          stderr_bytes: result.stderr.total,
          stdout_dropped_bytes: result.stdout.dropped,
          stderr_dropped_bytes: result.stderr.dropped,
          truncated: result.stdout.dropped > 0 || result.stderr.dropped > 0,
          output_limited: result.outputLimited,
          limits: {
            max_processes: processesBy === null ? null : limits.processes,
            processes_limited_by: processesBy,
            max_memory_bytes: limited ? limits.memoryBytes : null,
            max_cpu_seconds: limited ? limits.cpuSeconds : null,
            max_file_bytes: limited ? limits.fileBytes : null
          },
          sandbox: sandboxed ? "bwrap" as const : "none" as const,
          cwd: workspace.root,
          ...(moved.length === 0 ? {} : { moved_aside: moved }),
          ...(before === undefined || after === undefined ? {} : { workspace_changed: before !== after || moved.length > 0 })
        })
      })).pipe(Effect.map((output) => output(moved)))
    })
  const recover = (callId: string): Effect.Effect<void> =>
    Effect.promise(() => Process.endMarked(`${Process.markerName}=${markerOf(callId)}`, config.shellGraceMs)).pipe(
      // What the cut call created at protected paths is moved aside now, as it would have been.
      Effect.andThen(Effect.sync(() => Notes.read(markerOf(callId)))),
      Effect.flatMap((note) =>
        note === undefined || note.root !== workspace.root ? Effect.void : Effect.scoped(Effect.gen(function*() {
          const rootFd = yield* workspace.openRoot
          Sandbox.moveAside(rootFd, note.missing, markerOf(callId).slice(0, 8))
          Notes.remove(markerOf(callId))
        })).pipe(Effect.ignore)
      )
    )
  return { sandbox, run, recover }
})

/** The shell runner as a Layer. */
export const layer: Layer.Layer<Shell, Sandbox.SandboxUnavailable, ToolsConfig | Workspace> = Layer.effect(Shell, make)

export const tool = Tool.make({
  name: "shell",
  description:
    "Run a shell command (/bin/sh -c) in the workspace root, normally sandboxed (no network, read-only system and .git, writable workspace, private /tmp; the output's `sandbox` field says how it ran). Returns exit code, signal, duration and stdout/stderr (long output keeps its start and end; a command printing far more is stopped, `output_limited`). Processes, memory, CPU time and file size are limited (`limits`). A non-zero exit is a result, not an error. Background processes are killed when the command exits.",
  input: Input,
  output: Output,
  idempotent: false,
  execute: (input, context) => Effect.flatMap(Shell, (shell) => shell.run(input.command, input.timeout_ms, context.callId)),
  observation: (input, output) => observation(input.command, output),
  // A call cut by a crash may still run (its timeout died with rx): ended now; its effect stays unknown.
  recover: (_input, context) => Effect.flatMap(Shell, (shell) => Effect.as(shell.recover(context.callId), Option.none()))
})

/**
 * What a command's result observes, for the no-progress rule: only when the sandbox says the
 * command changed nothing in the workspace (otherwise its effect may not show in its output).
 * The output apart from what restates the call: the command, its duration and byte counts, and
 * each word of the command where the output repeats it (`echo noop1`, `echo noop2`, ... all
 * observe the same).
 */
export const observation = (command: string, output: Output): unknown => {
  if (output.workspace_changed !== false) return undefined
  const words = new Set(command.match(wordPattern) ?? [])
  const masked = (text: string) => text.replace(wordPattern, (word) => (words.has(word) ? "\u2022" : word))
  return {
    exit_code: output.exit_code,
    signal: output.signal,
    timed_out: output.timed_out,
    output_limited: output.output_limited,
    stdout: masked(output.stdout),
    stderr: masked(output.stderr)
  }
}

const wordPattern = /[\p{L}\p{N}_./-]+/gu
