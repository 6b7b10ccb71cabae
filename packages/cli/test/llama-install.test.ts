/**
 * An rx installed into a prefix (as `scripts/install-rx.mjs --prefix DIR` lays it out) without
 * node-llama-cpp: `--model-file` says, in one line, the exact command that installs it where this
 * rx loads it from, the CPU build only.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { cpSync, mkdirSync, mkdtempSync, realpathSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { Install } from "@rx/llama"
import { bin, exec, sandbox } from "./helpers.js"

describe("--model-file without node-llama-cpp", () => {
  it.live("an rx in a --prefix folder gives the npm command for that folder, with the CPU build of this platform", () =>
    Effect.gen(function*() {
      const prefix = mkdtempSync(join(tmpdir(), "rx-prefix-"))
      const modules = join(prefix, "lib", "node_modules")
      // rx's bundle, and better-sqlite3 beside it, as the packed tarball installs them; no node-llama-cpp.
      cpSync(dirname(bin), join(modules, "@rx", "cli", "dist"), { recursive: true })
      symlinkSync(realpathSync(join(dirname(bin), "..", "node_modules", "better-sqlite3")), join(modules, "better-sqlite3"))
      mkdirSync(join(prefix, "bin"))
      const entry = join(modules, "@rx", "cli", "dist", "rx.mjs")
      symlinkSync(entry, join(prefix, "bin", "rx"))
      const box = sandbox()
      // A GGUF header is all rx checks before it loads node-llama-cpp.
      const model = join(box.root, "tiny.gguf")
      writeFileSync(model, Buffer.concat([Buffer.from("GGUF", "latin1"), Buffer.from([3, 0, 0, 0]), Buffer.alloc(64)]))
      const ran = yield* exec(process.execPath, [join(prefix, "bin", "rx"), "run", "read hello.txt", "--model-file", model, "--db", box.db, "--workspace", box.workspace, "--sandbox", "none"])
      expect(ran.code).toBe(1)
      const lines = ran.stderr.trim().split("\n")
      expect(lines, ran.stderr).toHaveLength(1)
      const hint = Install.hint({ _tag: "prefix", prefix: realpathSync(prefix) }, process.platform, process.arch)
      expect(lines[0]).toContain(`node-llama-cpp, which runs GGUF models, did not load`)
      expect(lines[0]).toContain(`install it with: ${hint}`)
      if (process.platform === "linux" && process.arch === "x64") {
        expect(hint).toContain(`npm install --prefix ${realpathSync(prefix)}/lib --no-save --omit=optional node-llama-cpp@${Install.version} @node-llama-cpp/linux-x64@${Install.version}`)
      }
    }))
})
