/**
 * The mounting example as a user builds it: `main.ts` and `tsconfig.json` (the README's, with no
 * `skipLibCheck`) in a new folder whose node_modules hold @rx/cli and its peers, compiled with tsc
 * and run with node. `myapp rx ...` helps, refuses and exits as `rx ...`, and the app's own
 * command still runs. It needs `pnpm build` first (the packages' `dist`).
 */
import { describe, expect, it, onTestFinished } from "vitest"
import { execFile } from "node:child_process"
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const here = dirname(fileURLToPath(import.meta.url))
const example = join(here, "..")
const root = join(example, "..", "..")
const cli = join(root, "packages", "cli")

/** A new folder with the example and the packages it imports, as npm would install them. */
const app = () => {
  const dir = mkdtempSync(join(tmpdir(), "rx-mount-"))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  for (const file of ["main.ts", "tsconfig.json"]) copyFileSync(join(example, file), join(dir, file))
  writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module" }))
  const link = (name: string, target: string) => {
    mkdirSync(dirname(join(dir, "node_modules", name)), { recursive: true })
    symlinkSync(target, join(dir, "node_modules", name), "dir")
  }
  link("@rx/cli", cli)
  for (const name of ["@effect/cli", "@effect/platform", "@effect/platform-node", "effect"]) link(name, join(cli, "node_modules", name))
  link("@types/node", join(root, "node_modules", "@types", "node"))
  return dir
}

/** `node args...` in `cwd`, without blocking the test's worker: its exit code and output. */
const node = (args: ReadonlyArray<string>, cwd: string) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = execFile(process.execPath, [...args], { cwd, encoding: "utf8", timeout: 240_000 }, (error, stdout, stderr) =>
      resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : null, stdout, stderr }))
    onTestFinished(() => void child.kill())
  })

const run = (dir: string, args: ReadonlyArray<string>) => node([join(dir, "dist", "main.js"), ...args], dir)

describe("examples/mount: rx's commands in an app of one's own", () => {
  it("compiles with the README's tsconfig (no skipLibCheck) and runs: help, refusals and exit codes as rx's", async () => {
    const dir = app()
    const tsc = await node([join(root, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json"], dir)
    expect(tsc.code, tsc.stdout + tsc.stderr).toBe(0)
    expect(await run(dir, ["hello", "--name", "you"])).toEqual({ code: 0, stdout: "hello you\n", stderr: "" })
    const help = await run(dir, ["rx", "--help"])
    expect(help.code).toBe(0)
    expect(help.stdout).toContain("rx <command> --help shows its flags")
    expect((await run(dir, ["rx", "list", "--help"])).stdout).toMatch(/--json +one JSON object per goal/)
    const refused = await run(dir, ["rx", "lst"])
    expect(refused).toEqual({ code: 1, stdout: "", stderr: "rx: there is no command \"lst\" (did you mean list?) (rx --help lists the commands)\n" })
    const bad = await run(dir, ["rx", "run", "hi", "--max-iterations", "0"])
    expect(bad).toEqual({ code: 1, stdout: "", stderr: "rx: --max-iterations: expected a whole number from 1 up, got \"0\"\n" })
    // A refused outcome: rx inspect of a log that is not there; and rx list before any run, an empty list.
    const state = join(dir, "state")
    const missing = await run(dir, ["rx", "inspect", "nope", "--db", join(state, "rx.db")])
    expect(missing.code).toBe(1)
    expect(missing.stderr).toMatch(/^rx: no rx database at /)
    const none = await run(dir, ["rx", "list", "--db", join(state, "rx.db")])
    expect(none.code).toBe(0)
    expect(none.stdout).toContain("no goals yet")
  }, 300_000)
})
