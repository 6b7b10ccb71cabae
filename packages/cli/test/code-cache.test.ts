/**
 * The bundled `rx` turns on Node's compile cache (Node 22.1 and later) in the user's cache folder
 * (`$XDG_CACHE_HOME/rx`): the first command fills it, the next ones take the code V8 compiled
 * there instead of compiling the chunks again. The cache is only a speed-up: a folder that cannot
 * be written must never break a command or add to its output.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { chmodSync, existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from "node:fs"
import * as Module from "node:module"
import { dirname, join } from "node:path"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { bin, rx, sandbox } from "./helpers.js"

const nodeHasCompileCache = typeof Reflect.get(Module, "enableCompileCache") === "function"

/** Every file under `folder`, recursively. */
const filesUnder = (folder: string): Array<string> =>
  existsSync(folder)
    ? readdirSync(folder).flatMap((name) => {
      const path = join(folder, name)
      return statSync(path).isDirectory() ? filesUnder(path) : [path]
    })
    : []

/** `rx list` with `cache` as XDG_CACHE_HOME; without Node's own compile-cache variables. */
const list = (db: string, cache: string, env: Record<string, string> = {}) =>
  rx(["list", "--db", db], { XDG_CACHE_HOME: cache, NODE_COMPILE_CACHE: undefined, NODE_DISABLE_COMPILE_CACHE: undefined, ...env })

/** A sandbox whose log holds one finished goal (run with a cache of its own). */
const withGoal = Effect.gen(function*() {
  const server = yield* FakeServer.make([FakeServer.completion({ toolCalls: [{ name: "done", arguments: JSON.stringify({ summary: "ok" }) }] })])
  const box = sandbox()
  const ran = yield* rx(["run", "a goal", "--db", box.db, "--workspace", box.workspace, "--base-url", server.baseUrl, "--model", "fake", "--sandbox", "none"], {
    XDG_CACHE_HOME: join(box.root, "run-cache")
  })
  expect(ran.code).toBe(0)
  return box
})

describe.skipIf(!nodeHasCompileCache)("the compile cache of the bundled rx", () => {
  it.scopedLive("is filled by a first run in $XDG_CACHE_HOME/rx, then taken by the next: the main chunk is not compiled again", () =>
    Effect.gen(function*() {
      const { root, db } = yield* withGoal
      const cache = join(root, "cache")
      const first = yield* list(db, cache)
      expect(first.stderr).toBe("")
      expect(first.code).toBe(0)
      expect(first.stdout).toContain("terminated(done)")
      expect(filesUnder(join(cache, "rx")).length).toBeGreaterThan(1)
      // Node says, on stderr, what it did with each chunk's cache.
      const second = yield* list(db, cache, { NODE_DEBUG_NATIVE: "COMPILE_CACHE" })
      expect(second.code).toBe(0)
      expect(second.stdout).toBe(first.stdout)
      const chunks = join(dirname(bin), "rx-chunks")
      // "[compile cache] V8 code cache for CommonJS <file> was accepted" (Node 24), "cache for <file> was accepted" (22).
      const accepted = second.stderr.split("\n").filter((line) => line.startsWith("[compile cache]") && line.includes("was accepted"))
      expect(accepted.some((line) => line.includes(`${chunks}/main-`))).toBe(true)
      expect(second.stderr).not.toContain("was rejected")
    }))

  it.scopedLive("RX_CODE_CACHE=0 leaves the cache unused: nothing is written", () =>
    Effect.gen(function*() {
      const { root, db } = yield* withGoal
      const cache = join(root, "cache")
      const ran = yield* list(db, cache, { RX_CODE_CACHE: "0" })
      expect(ran.code).toBe(0)
      expect(ran.stdout).toContain("terminated(done)")
      expect(existsSync(cache)).toBe(false)
    }))

  it.scopedLive("a cache folder that cannot be written: the command runs all the same, and says nothing of it", () =>
    Effect.gen(function*() {
      const { root, db } = yield* withGoal
      // XDG_CACHE_HOME is a file: no folder can be made in it (even as root).
      const file = join(root, "not-a-folder")
      writeFileSync(file, "")
      const ran = yield* list(db, file)
      expect(ran.stderr).toBe("")
      expect(ran.code).toBe(0)
      expect(ran.stdout).toContain("terminated(done)")
      // A cache folder that is read-only (root writes there anyway: then it is used).
      const readOnly = join(root, "read-only")
      mkdirSync(join(readOnly, "rx"), { recursive: true })
      chmodSync(join(readOnly, "rx"), 0o500)
      const again = yield* list(db, readOnly)
      expect(again).toEqual(ran)
    }))
})
