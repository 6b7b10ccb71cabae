/**
 * A goal's tools touch only its own folder: a worker drives a goal with tools only when its root
 * is the goal's recorded volume and the recorded workspace is a real folder inside that root. The
 * attacks: a goal of another host's volume, a workspace that leaves the root through a symbolic
 * link, a goal that records no volume, a volume file that was tampered with.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { LanguageModel, Runner, type Settings, StateStore, Tool, ToolRegistry } from "@rx/kernel"
import { GoalEntity, Workspaces } from "@rx/cluster"
import { fileURLToPath } from "node:url"
import * as Processes from "../../store-pg/test/processes.js"

const volumeScript = fileURLToPath(new URL("./fixtures/volume.mjs", import.meta.url))

const folder = (prefix: string) => fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), prefix)))

/** A tool that writes `name` into the workspace it was built for. */
const writer = (workspace: string) =>
  Tool.make({
    name: "write",
    description: "Write a file in the workspace.",
    input: Schema.Struct({ name: Schema.String }),
    output: Schema.Struct({ at: Schema.String }),
    idempotent: false,
    execute: ({ name }) =>
      Effect.sync(() => {
        const at = path.join(workspace, name)
        fs.writeFileSync(at, "written\n")
        return { at }
      })
  })

const tools = (workspace: string) => ToolRegistry.make([writer(workspace)])

const model = LanguageModel.layerScripted([LanguageModel.callTool("write", { name: "out.txt" }), LanguageModel.done("written")])

/** A worker whose workspace root is `root`, on a memory log shared through `store`. */
const worker = (root: string) =>
  Layer.mergeAll(Workspaces.layerShared({ root, tools }).pipe(Layer.provide(NodeContext.layer)), model)

/** Record a goal as a submitter would, with its settings, offering the writer. */
let submitted = 0
const submit = (settings: Settings.Settings) =>
  Runner.submit({ goal: "write out.txt", goalId: `goal-${++submitted}`, options: { maxIterations: 4, settings } }).pipe(
    Effect.provide(ToolRegistry.layer([writer("/nowhere")]))
  )

const events = (goalId: string) => Effect.flatMap(StateStore.StateStore, (store) => store.load(goalId))

describe("Workspaces", () => {
  it.effect("a root's volume id is made once: processes racing to make it read the same one", () =>
    Effect.gen(function*() {
      const root = folder("rx-volume-")
      const ids = yield* Effect.forEach(Array.from({ length: 8 }), () => Workspaces.volume(root), { concurrency: "unbounded" })
      expect(new Set(ids.map((v) => v.id)).size).toBe(1)
      expect(fs.readFileSync(path.join(root, Workspaces.volumeFile), "utf8").trim()).toBe(ids[0]?.id)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("processes racing to make a root's volume id all read the one made, never a file without it", () =>
    Effect.gen(function*() {
      const roots = Array.from({ length: 80 }, () => folder("rx-volume-"))
      // Each process makes the volume of root i at the same moment as the others.
      const start = Date.now() + 2_000
      const racers = yield* Effect.forEach(Array.from({ length: 4 }), () =>
        Processes.startScript(volumeScript, [String(start), "60", ...roots]))
      const outputs = yield* Effect.forEach(racers, (racer) => Effect.map(racer.waitFor("DONE", 120_000), () => racer.stdout()))
      const lines = outputs.map((output) => output.split("\n").filter((line) => line !== "" && line !== "DONE"))
      expect(lines.flat().filter((line) => !line.startsWith("ID "))).toEqual([])
      roots.forEach((root, i) => {
        const id = fs.readFileSync(path.join(root, Workspaces.volumeFile), "utf8").trim()
        expect(lines.map((racer) => racer[i])).toEqual(racers.map(() => `ID ${id}`))
        expect(fs.readdirSync(root)).toEqual([Workspaces.volumeFile])
      })
    }), 180_000)

  it.live("a volume file still empty (made in place where there are no hard links) is read again until its id is there; one that stays empty is refused", () =>
    Effect.gen(function*() {
      const root = folder("rx-volume-")
      const file = path.join(root, Workspaces.volumeFile)
      fs.writeFileSync(file, "")
      const id = "0b1c2d3e-2222-4000-8000-000000000000"
      const filled = setTimeout(() => fs.writeFileSync(file, `${id}\n`), 300)
      yield* Effect.addFinalizer(() => Effect.sync(() => clearTimeout(filled)))
      expect((yield* Workspaces.volume(root)).id).toBe(id)
      const empty = folder("rx-volume-")
      fs.writeFileSync(path.join(empty, Workspaces.volumeFile), "")
      const refused = yield* Effect.either(Workspaces.volume(empty))
      expect(Either.isLeft(refused) && refused.left.message).toContain("does not hold a volume id")
    }).pipe(Effect.provide(NodeContext.layer), Effect.scoped))

  it.effect("a temporary volume file a killed process left is removed; one in progress is kept", () =>
    Effect.gen(function*() {
      const root = folder("rx-volume-")
      const leftover = path.join(root, `${Workspaces.volumeFile}.0b1c2d3e-0000-4000-8000-000000000000.tmp`)
      const inProgress = path.join(root, `${Workspaces.volumeFile}.0b1c2d3e-1111-4000-8000-000000000000.tmp`)
      for (const file of [leftover, inProgress]) fs.writeFileSync(file, "0b1c2d3e\n")
      const old = new Date(Date.now() - 5 * 60_000)
      fs.utimesSync(leftover, old, old)
      yield* Workspaces.volume(root)
      expect(fs.readdirSync(root).sort()).toEqual([Workspaces.volumeFile, path.basename(inProgress)].sort())
    }).pipe(Effect.provide(NodeContext.layer)))

  it.effect("a goal of this volume runs its tools in its own folder", () =>
    Effect.gen(function*() {
      const root = folder("rx-root-")
      const workspace = path.join(root, "project")
      fs.mkdirSync(workspace)
      const volume = yield* Workspaces.volume(root).pipe(Effect.provide(NodeContext.layer))
      const goalId = yield* submit(Workspaces.stamp(volume, workspace))
      const driven = yield* GoalEntity.drive(goalId).pipe(Effect.provide(worker(root)))
      expect(driven).toMatchObject({ status: "terminated", reason: "done" })
      expect(fs.readFileSync(path.join(workspace, "out.txt"), "utf8")).toBe("written\n")
    }).pipe(Effect.provide(StateStore.layerMemory)))

  it.effect("a goal of another host's volume is refused on this worker: nothing runs, nothing is recorded", () =>
    Effect.gen(function*() {
      // Two hosts, each with its own root, the same path inside.
      const here = folder("rx-here-")
      const there = folder("rx-there-")
      for (const root of [here, there]) fs.mkdirSync(path.join(root, "project"))
      const theirs = yield* Workspaces.volume(there).pipe(Effect.provide(NodeContext.layer))
      // Recorded with this worker's path, but the other host's volume.
      const goalId = yield* submit(Workspaces.stamp(theirs, path.join(here, "project")))
      const before = (yield* events(goalId)).length
      const driven = yield* GoalEntity.drive(goalId).pipe(Effect.provide(worker(here)))
      expect(driven).toMatchObject({ status: "refused", reason: "@rx/cluster/WrongWorkspace" })
      expect(driven.detail).toContain(theirs.id)
      expect((yield* events(goalId)).length).toBe(before)
      for (const root of [here, there]) expect(fs.existsSync(path.join(root, "project", "out.txt"))).toBe(false)
    }).pipe(Effect.provide(StateStore.layerMemory)))

  it.effect("a workspace that leaves the root through a symbolic link is refused", () =>
    Effect.gen(function*() {
      const root = folder("rx-root-")
      const outside = folder("rx-outside-")
      fs.symlinkSync(outside, path.join(root, "escape"))
      const volume = yield* Workspaces.volume(root).pipe(Effect.provide(NodeContext.layer))
      const goalId = yield* submit(Workspaces.stamp(volume, path.join(root, "escape")))
      const driven = yield* GoalEntity.drive(goalId).pipe(Effect.provide(worker(root)))
      expect(driven).toMatchObject({ status: "refused", reason: "@rx/cluster/WrongWorkspace" })
      expect(driven.detail).toContain("not a folder inside")
      expect(fs.readdirSync(outside)).toEqual([])
    }).pipe(Effect.provide(StateStore.layerMemory)))

  it.effect("a goal that records no volume gets no workspace; fixed tools refuse a goal that records one", () =>
    Effect.gen(function*() {
      const root = folder("rx-root-")
      const volume = yield* Workspaces.volume(root).pipe(Effect.provide(NodeContext.layer))
      const plain = yield* submit({ workspace: root })
      expect(yield* GoalEntity.drive(plain).pipe(Effect.provide(worker(root)))).toMatchObject({ status: "refused" })
      expect(fs.existsSync(path.join(root, "out.txt"))).toBe(false)

      const fixed = Layer.mergeAll(Workspaces.layerFixed.pipe(Layer.provide(ToolRegistry.layer([writer(root)]))), model)
      const placed = yield* submit(Workspaces.stamp(volume, root))
      expect(yield* GoalEntity.drive(placed).pipe(Effect.provide(fixed))).toMatchObject({ status: "refused", reason: "@rx/cluster/WrongWorkspace" })
      expect(fs.existsSync(path.join(root, "out.txt"))).toBe(false)
      // A goal with no workspace runs with the fixed tools.
      expect(yield* GoalEntity.drive(plain).pipe(Effect.provide(fixed))).toMatchObject({ status: "terminated", reason: "done" })
    }).pipe(Effect.provide(StateStore.layerMemory)))

  it.effect("a folder's volume is the nearest one above it, read only", () =>
    Effect.gen(function*() {
      const root = folder("rx-root-")
      const nested = path.join(root, "a", "b")
      fs.mkdirSync(nested, { recursive: true })
      expect(yield* Workspaces.find(nested)).toBeUndefined()
      expect(fs.existsSync(path.join(nested, Workspaces.volumeFile))).toBe(false)
      const volume = yield* Workspaces.volume(root)
      expect(yield* Workspaces.find(nested)).toEqual(volume)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.effect("a root that is not a folder, or whose volume file holds no id, is a WorkspaceError", () =>
    Effect.gen(function*() {
      const missing = yield* Effect.either(Workspaces.volume("/nonexistent/rx-root"))
      expect(Either.isLeft(missing) && missing.left.message).toContain("no such folder")
      const root = folder("rx-root-")
      fs.writeFileSync(path.join(root, Workspaces.volumeFile), "$(rm -rf /)\n")
      const tampered = yield* Effect.either(Workspaces.volume(root))
      expect(Either.isLeft(tampered) && tampered.left._tag).toBe("@rx/cluster/WorkspaceError")
      expect(Either.isLeft(tampered) && tampered.left.message).toContain("does not hold a volume id")
    }).pipe(Effect.provide(NodeContext.layer)))
})
