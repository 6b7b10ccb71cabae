/**
 * Which folder a goal's tools touch on a worker. A goal's file and shell tools work in its
 * workspace, a folder on some disk, while the cluster may drive any goal on any worker. rx's rule:
 * the workers of a cluster share one workspace root (the same volume mounted at the same path on
 * every host, or every worker on one host), named by a random volume id kept in
 * `<root>/.rx-volume`. A goal records its workspace and that id when it is submitted (`stamp`); a
 * worker gives a goal its tools only when the worker's own root has the same id and the workspace
 * is a folder inside that root once symbolic links are resolved. Otherwise the goal is refused on
 * that worker before anything runs or is recorded: it stays open, and runs when driven where its
 * folder is (a worker whose volume is not mounted sees another id, or none, and refuses).
 */
import { FileSystem, Path } from "@effect/platform"
import { type Settings, ToolRegistry } from "@rx/kernel"
import { Confinement } from "@rx/tools"
import { Context, Effect, Layer, Option, Schedule, Schema, type Scope } from "effect"

/** The file at the workspace root holding the volume's id. Tools must not reach it: add it to their `hiddenPaths`. */
export const volumeFile = ".rx-volume"

/** This worker must not run this goal's tools: its workspace is not here. */
export class WrongWorkspace extends Schema.TaggedError<WrongWorkspace>()("@rx/cluster/WrongWorkspace", {
  goalId: Schema.String,
  message: Schema.String
}) {}

/** The workspace root is unusable: not a folder, or its volume id cannot be read or made. */
export class WorkspaceError extends Schema.TaggedError<WorkspaceError>()("@rx/cluster/WorkspaceError", {
  root: Schema.String,
  message: Schema.String
}) {}

export interface Service {
  /**
   * The tools of one goal from the settings it recorded (its workspace and volume), valid while
   * the scope lasts, or `WrongWorkspace` when this worker must not run them.
   */
  readonly tools: (goalId: string, settings: Settings.Settings | undefined) => Effect.Effect<ToolRegistry.Service, WrongWorkspace, Scope.Scope>
}

export class Workspaces extends Context.Tag("@rx/cluster/Workspaces")<Workspaces, Service>() {}

/** A workspace root and its volume's id. */
export interface Volume {
  /** The root's real path. */
  readonly root: string
  readonly id: string
}

const VolumeId = Schema.String.pipe(Schema.pattern(/^[0-9a-f-]{8,64}$/))

/** Why the workspace root `root` is unusable. */
const failure = (root: string) => (why: string) => new WorkspaceError({ root, message: `the workspace root ${root}: ${why}` })

/** Whether `name` is a temporary file of `volume`, beside `.rx-volume` until it is linked into place. */
const isTemporary = (name: string) => name.startsWith(`${volumeFile}.`) && name.endsWith(".tmp")

/** How old a temporary file must be to be another process's leftover, not a creation in progress (on any host of the volume). */
const leftoverMs = 60_000

/** Remove the temporary files of `volume` in `root` that are leftovers: older than `leftoverMs`. */
const sweep = (root: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const names = yield* fs.readDirectory(root).pipe(Effect.orElseSucceed((): ReadonlyArray<string> => []))
    for (const name of names.filter(isTemporary)) {
      const file = path.join(root, name)
      const info = yield* Effect.option(fs.stat(file))
      const modified = Option.flatMap(info, (i) => i.mtime)
      if (Option.isSome(modified) && Date.now() - modified.value.getTime() > leftoverMs) yield* Effect.ignore(fs.remove(file))
    }
  })

/**
 * The volume of the workspace root `root`: its real path and the id in `.rx-volume`, made once.
 * The id is written whole to a temporary file, then linked into place: no process, killed or
 * racing, ever sees a `.rx-volume` without its id, and of two processes making it at once both
 * read the winner's. A temporary file a killed process left is removed by a later call.
 */
export const volume = (root: string): Effect.Effect<Volume, WorkspaceError, FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const failed = failure(root)
    const real = yield* fs.realPath(path.resolve(root)).pipe(Effect.mapError(() => failed("no such folder")))
    if ((yield* fs.stat(real).pipe(Effect.mapError((e) => failed(e.message)))).type !== "Directory") return yield* failed("not a folder")
    const file = path.join(real, volumeFile)
    yield* sweep(real)
    if (!(yield* fs.exists(file).pipe(Effect.orElseSucceed(() => false)))) {
      const id = crypto.randomUUID()
      const temporary = path.join(real, `${volumeFile}.${id}.tmp`)
      const exists = (e: { readonly _tag: string; readonly reason?: string }) => e._tag === "SystemError" && e.reason === "AlreadyExists"
      const write = (at: string) => fs.writeFileString(at, `${id}\n`, { flag: "wx", mode: 0o644 })
      // A file system without hard links (some network and FUSE ones): made in place, exclusively;
      // a racer that reads it before its id is written reads again (`read`).
      const placed = fs.link(temporary, file).pipe(Effect.catchIf((e) => !exists(e), () => write(file)))
      yield* write(temporary).pipe(
        Effect.zipRight(placed),
        Effect.catchIf(exists, () => Effect.void),
        Effect.ensuring(Effect.ignore(fs.remove(temporary))),
        Effect.mapError((e) => failed(`cannot write its volume id to ${file}: ${e.message}`))
      )
    }
    return yield* read(root, real)
  })

/** The volume whose root's real path is `real` (`root` as given), from its `.rx-volume`. */
const read = (root: string, real: string): Effect.Effect<Volume, WorkspaceError, FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const file = path.join(real, volumeFile)
    const failed = failure(root)
    // Empty while another process writes it in place (`volume`, without hard links): read again, for up to 2 s.
    const text = yield* fs.readFileString(file).pipe(
      Effect.mapError((e) => failed(`cannot read ${file}: ${e.message}`)),
      Effect.filterOrFail((text) => text.trim() !== "", () => "empty" as const),
      Effect.retry({ schedule: Schedule.spaced("50 millis"), times: 40, while: (e) => e === "empty" }),
      Effect.catchIf((e) => e === "empty", () => Effect.succeed(""))
    )
    const id = yield* Schema.decodeUnknown(VolumeId)(text.trim()).pipe(
      Effect.mapError(() => failed(`${file} does not hold a volume id (remove it to make a new one, if no goal was submitted for this root)`))
    )
    return { root: real, id }
  })

/**
 * The volume a folder is on: the nearest `.rx-volume` at or above it (real paths), read only;
 * none when no folder above holds one. How a process outside the cluster (`rx resume`) checks
 * that a goal's recorded workspace is the folder it was submitted for.
 */
export const find = (folder: string): Effect.Effect<Volume | undefined, WorkspaceError, FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    let current = yield* fs.realPath(path.resolve(folder)).pipe(Effect.orElseSucceed(() => ""))
    while (current !== "") {
      if (yield* fs.exists(path.join(current, volumeFile)).pipe(Effect.orElseSucceed(() => false))) return yield* read(current, current)
      const parent = path.dirname(current)
      current = parent === current ? "" : parent
    }
    return undefined
  })

/** What a goal working in `workspace` (an absolute folder inside the volume's root) records in its settings. */
export const stamp = (volume: Volume, workspace: string): { readonly workspace: string; readonly volume: string } => ({
  workspace,
  volume: volume.id
})

/**
 * Goals working in folders of the shared workspace root `root`: each gets the tools `tools` builds
 * for its recorded workspace, after the checks above. Fails at once when the root is unusable.
 */
export const layerShared = <E extends { readonly message: string }>(options: {
  readonly root: string
  readonly tools: (workspace: string) => Effect.Effect<ToolRegistry.Service, E, Scope.Scope>
}): Layer.Layer<Workspaces, WorkspaceError, FileSystem.FileSystem | Path.Path> =>
  Layer.effect(
    Workspaces,
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const own = yield* volume(options.root)
      return Workspaces.of({
        tools: (goalId, settings) =>
          Effect.gen(function*() {
            const refuse = (why: string) => new WrongWorkspace({ goalId, message: `goal ${goalId} is not run on this worker: ${why}` })
            const { workspace: recorded, volume: id } = settings ?? {}
            if (id === undefined) return yield* refuse("it records no workspace volume (it was not submitted for a cluster's workspace root)")
            if (id !== own.id) {
              return yield* refuse(`its workspace is on volume ${id}, and this worker's root ${own.root} is volume ${own.id} (is the shared volume mounted there?)`)
            }
            if (recorded === undefined || !path.isAbsolute(recorded)) return yield* refuse("it records no workspace folder")
            const real = yield* Confinement.folderInside(own.root, recorded).pipe(Effect.provideService(FileSystem.FileSystem, fs))
            if (Option.isNone(real)) return yield* refuse(`its workspace ${recorded} is not a folder inside this worker's root ${own.root}`)
            return yield* options.tools(real.value).pipe(
              Effect.mapError((error) => refuse(`its tools cannot be set up: ${error.message}`))
            )
          })
      })
    })
  )

/**
 * The same tools, from the `ToolRegistry` at hand, for every goal: tools that touch no host's files
 * (an HTTP API, a database). A goal that recorded a workspace volume needs its folder and is refused.
 */
export const layerFixed: Layer.Layer<Workspaces, never, ToolRegistry.ToolRegistry> = Layer.effect(
  Workspaces,
  Effect.map(ToolRegistry.ToolRegistry, (registry) =>
    Workspaces.of({
      tools: (goalId, settings) => {
        const volume = settings?.volume
        return volume !== undefined
          ? Effect.fail(
            new WrongWorkspace({
              goalId,
              message: `goal ${goalId} is not run on this worker: it works in a folder of workspace volume ${volume}, and this worker offers no workspace`
            })
          )
          : Effect.succeed(registry)
      }
    }))
)
