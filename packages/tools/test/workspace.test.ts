import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { failed, invoke, makeDirs, ok, sha256, withTools } from "./helpers.js"

const setup = () => {
  const dirs = makeDirs()
  fs.writeFileSync(path.join(dirs.outside, "secret.txt"), "outside secret\n")
  return { ...dirs, config: { workspace: dirs.ws, sandbox: "none" as const } }
}

/** Every file tool, called on `p`. */
const allTools = (p: string) => [
  ["read_file", { path: p }],
  ["write_file", { path: p, content: "pwned\n" }],
  ["edit_file", { path: p, old_text: "outside", new_text: "pwned", expected_sha256: sha256("outside secret\n") }],
  ["list_dir", { path: p }],
  ["find_files", { pattern: "*", path: p }],
  ["search_text", { pattern: "secret", path: p }]
] as const

describe("Workspace confinement", () => {
  it.effect("refuses .., outside absolute paths, a prefix-sharing sibling and links that leave", () =>
    Effect.gen(function*() {
      const { base, cleanup, config, outside, ws } = setup()
      // A sibling whose name starts with the workspace's.
      fs.mkdirSync(path.join(base, "ws-evil"))
      fs.writeFileSync(path.join(base, "ws-evil", "secret.txt"), "outside secret\n")
      fs.symlinkSync(path.join(outside, "secret.txt"), path.join(ws, "abs-link"))
      fs.symlinkSync("../outside/secret.txt", path.join(ws, "rel-link"))
      fs.symlinkSync(outside, path.join(ws, "dir-link"))
      fs.symlinkSync(path.join(outside, "missing.txt"), path.join(ws, "dangling"))
      fs.symlinkSync("../ws-evil", path.join(ws, "evil-dir"))
      fs.mkdirSync(path.join(ws, "sub"))
      fs.symlinkSync("../../outside", path.join(ws, "sub", "up"))
      const cases: ReadonlyArray<readonly [string, string]> = [
        ["../outside/secret.txt", ".."],
        ["sub/../../outside/secret.txt", ".."],
        ["../ws-evil/secret.txt", ".."],
        [path.join(base, "ws-evil", "secret.txt"), "outside the workspace"],
        [path.join(outside, "secret.txt"), "outside the workspace"],
        ["/etc/passwd", "outside the workspace"],
        ["abs-link", "symbolic link"],
        ["rel-link", "symbolic link"],
        ["dir-link/secret.txt", "symbolic link"],
        ["dir-link", "symbolic link"],
        ["dangling", "symbolic link"],
        ["evil-dir/secret.txt", "symbolic link"],
        ["sub/up/secret.txt", "symbolic link"],
        [path.join(ws, "dir-link", "secret.txt"), "symbolic link"],
        [`${ws}/sub/../../outside/secret.txt`, ".."],
        [`${ws}/sub/../real`, ".."]
      ]
      for (const [p, why] of cases) {
        for (const [tool, input] of allTools(p)) {
          const failure = failed(yield* withTools(config, invoke(tool, input)))
          expect(failure.kind, `${tool} ${p}`).toBe("recoverable")
          expect(failure.message, `${tool} ${p}`).toContain(`path "${p}" is refused`)
          expect(failure.message, `${tool} ${p}`).toContain(why)
          expect(failure.details).toMatchObject({ _tag: "@rx/tools/PathRefused", path: p })
        }
      }
      expect(fs.readFileSync(path.join(outside, "secret.txt"), "utf8")).toBe("outside secret\n")
      expect(fs.readFileSync(path.join(base, "ws-evil", "secret.txt"), "utf8")).toBe("outside secret\n")
      expect(fs.existsSync(path.join(outside, "missing.txt"))).toBe(false)
      cleanup()
    }))

  it.effect("follows links that stay inside, and accepts absolute paths inside", () =>
    Effect.gen(function*() {
      const { cleanup, config, ws } = setup()
      fs.mkdirSync(path.join(ws, "real"))
      fs.writeFileSync(path.join(ws, "real", "f.txt"), "inside\n")
      fs.symlinkSync("real", path.join(ws, "alias"))
      const read = ok(yield* withTools(config, invoke("read_file", { path: "alias/f.txt" })))
      expect(read["content"]).toBe("inside\n")
      expect(read["resolved_path"]).toBe(path.join(ws, "real", "f.txt"))
      const abs = ok(yield* withTools(config, invoke("read_file", { path: path.join(ws, "real", "f.txt") })))
      expect(abs["content"]).toBe("inside\n")
      ok(yield* withTools(config, invoke("write_file", { path: "alias/g.txt", content: "new\n" })))
      expect(fs.readFileSync(path.join(ws, "real", "g.txt"), "utf8")).toBe("new\n")
      // The listing shows the link as a link and does not follow it.
      const listed = ok(yield* withTools(config, invoke("list_dir", { depth: 2 })))
      expect(listed["entries"]).toContainEqual({ path: "alias", type: "symlink" })
      expect(listed["entries"]).not.toContainEqual(expect.objectContaining({ path: "alias/f.txt" }))
      cleanup()
    }))

  it.effect("a workspace given through a symlink works, and the outside stays refused", () =>
    Effect.gen(function*() {
      const { base, cleanup, outside, ws } = setup()
      const alias = path.join(base, "ws-alias")
      fs.symlinkSync(ws, alias)
      const config = { workspace: alias, sandbox: "none" as const }
      ok(yield* withTools(config, invoke("write_file", { path: "a.txt", content: "a\n" })))
      ok(yield* withTools(config, invoke("read_file", { path: path.join(alias, "a.txt") })))
      const refused = failed(yield* withTools(config, invoke("read_file", { path: path.join(outside, "secret.txt") })))
      expect(refused.message).toContain("outside the workspace")
      cleanup()
    }))

  it.scoped("writes never follow a link swapped in and out during many writes", () =>
    Effect.gen(function*() {
      const { cleanup, config, outside, ws } = setup()
      yield* Effect.addFinalizer(() => Effect.sync(cleanup))
      const outsideDir = path.join(outside, "dir")
      fs.mkdirSync(outsideDir)
      fs.writeFileSync(path.join(outsideDir, "f.txt"), "outside secret\n")
      fs.writeFileSync(path.join(ws, "target"), "inside\n")
      fs.mkdirSync(path.join(ws, "dir"))
      fs.writeFileSync(path.join(ws, "dir", "f.txt"), "inside\n")
      // Another process swaps, as fast as it can, a file and a directory for links that lead out.
      // It ends itself when this test's process is gone (its parent changes), and the scope kills
      // it however the test ends (a timeout included).
      const script = `
        const fs = require("node:fs")
        const parent = process.ppid
        process.chdir(${JSON.stringify(ws)})
        const attempt = (f) => { try { f() } catch {} }
        for (let round = 0; ; round++) {
          if (round % 64 === 0 && process.ppid !== parent) process.exit(0)
          attempt(() => fs.symlinkSync(${JSON.stringify(path.join(outside, "secret.txt"))}, "t.link"))
          attempt(() => fs.renameSync("t.link", "target"))
          attempt(() => fs.writeFileSync("t.new", "inside\\n"))
          attempt(() => fs.renameSync("t.new", "target"))
          attempt(() => fs.renameSync("dir", "d.real"))
          attempt(() => fs.symlinkSync(${JSON.stringify(outsideDir)}, "d.link"))
          attempt(() => fs.renameSync("d.link", "dir"))
          attempt(() => fs.rmSync("dir", { recursive: true, force: true }))
          attempt(() => fs.renameSync("d.real", "dir"))
        }`
      yield* Effect.acquireRelease(
        Effect.sync(() => spawn(process.execPath, ["-e", script], { stdio: "ignore", detached: true })),
        (swapper) =>
          Effect.sync(() => {
            try {
              process.kill(-(swapper.pid ?? 0), "SIGKILL")
            } catch {
              // Already gone.
            }
          })
      )
      let succeeded = 0
      let refused = 0
      // 300 rounds of three writes, or fewer on a loaded machine: past a minute, once both
      // outcomes were seen, it stops (each write is checked the same whatever the count).
      const deadline = performance.now() + 60_000
      for (let i = 0; i < 300 && (performance.now() < deadline || succeeded === 0 || refused === 0); i++) {
        for (const p of ["target", "dir/f.txt", `dir/new-${i}.txt`]) {
          const outcome = yield* withTools(config, invoke("write_file", {
            path: p,
            content: "inside\n",
            expected_sha256: p.startsWith("dir/new") ? undefined : sha256("inside\n")
          }))
          if (outcome._tag === "Success") succeeded++
          else refused++
        }
      }
      expect(fs.readFileSync(path.join(outside, "secret.txt"), "utf8")).toBe("outside secret\n")
      expect(fs.readFileSync(path.join(outsideDir, "f.txt"), "utf8")).toBe("outside secret\n")
      expect(fs.readdirSync(outsideDir)).toEqual(["f.txt"])
      expect(fs.readdirSync(outside).sort()).toEqual(["dir", "secret.txt"])
      // Both branches ran: the race was real.
      expect(succeeded).toBeGreaterThan(0)
      expect(refused).toBeGreaterThan(0)
    }), 120_000)
})
