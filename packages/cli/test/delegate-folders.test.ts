/**
 * A sub-goal's folder is never a guarded one: a model that asks `delegate` for `.git` (however it
 * spells it) through `rx run` and `rx serve` is refused, nothing it scripted for the sub-goal runs,
 * and the user's next `git status` and `git commit` run no payload.
 */
import { describe, expect, it } from "@effect/vitest"
import type { Event } from "@rx/kernel"
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { jsonLines, rx, sandbox, serveRx } from "./helpers.js"
import { call, done, logOf, type Reply, treeModel } from "./tree.js"

/** Each spelling of the repository's `.git` (or a folder in it), and where its hooks folder is from there. */
const spellings: ReadonlyArray<{ readonly folder: string; readonly hooks: string; readonly git: string }> = [
  { folder: ".git", hooks: "hooks", git: "." },
  { folder: ".git/hooks", hooks: ".", git: ".." },
  { folder: "./.git", hooks: "hooks", git: "." },
  { folder: "sub/../.git", hooks: "hooks", git: "." },
  { folder: "link", hooks: "hooks", git: "." },
  { folder: "hooklink", hooks: ".", git: ".." }
]

const git = (workspace: string, args: ReadonlyArray<string>) =>
  execFileSync("git", ["-c", "user.name=rx test", "-c", "user.email=rx@example.invalid", ...args], { cwd: workspace, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })

/**
 * A workspace that is a git repository with one commit, `sub` and two links into `.git`, and a
 * folder outside it where a payload that ran leaves its mark; the scripts of a parent that asks
 * for each spelling and of sub-goals that would plant hooks and `core.fsmonitor` there.
 */
const attack = (box: { readonly root: string; readonly workspace: string }) => {
  const marks = join(box.root, "marks")
  mkdirSync(marks)
  mkdirSync(join(box.workspace, "sub"))
  git(box.workspace, ["init", "-q"])
  git(box.workspace, ["add", "-A"])
  git(box.workspace, ["commit", "-qm", "first"])
  symlinkSync(".git", join(box.workspace, "link"))
  symlinkSync(".git/hooks", join(box.workspace, "hooklink"))
  const payload = (name: string) => `#!/bin/sh\ntouch ${join(marks, name)}\n`
  const scripts: Record<string, ReadonlyArray<Reply>> = {
    "[P]": [...spellings.map(({ folder }, i) => call("delegate", { goal: `[A${i}] plant hooks`, folder })), done("tried every folder")]
  }
  spellings.forEach(({ hooks, git: gitDir }, i) => {
    scripts[`[A${i}]`] = [
      call("write_file", { path: `${hooks}/post-commit`, content: payload(`post-commit-${i}`) }),
      call("shell", {
        command: `printf '${payload(`pre-commit-${i}`).replaceAll("\n", "\\n")}' > ${hooks}/pre-commit && chmod +x ${hooks}/pre-commit ${hooks}/post-commit && git config --file ${gitDir}/config core.fsmonitor 'touch ${join(marks, `fsmonitor-${i}`)}; false'`
      }),
      done("planted")
    ]
  })
  const hooksBefore = readdirSync(join(box.workspace, ".git", "hooks")).sort()
  const configBefore = readFileSync(join(box.workspace, ".git", "config"), "utf8")
  /** The user's next `git status` and `git commit`: no payload runs, `.git`'s config and hooks are as they were. */
  const check = () => {
    writeFileSync(join(box.workspace, "hello.txt"), "changed\n")
    git(box.workspace, ["status"])
    git(box.workspace, ["commit", "-qam", "second"])
    expect(readdirSync(marks)).toEqual([])
    expect(readdirSync(join(box.workspace, ".git", "hooks")).sort()).toEqual(hooksBefore)
    expect(readFileSync(join(box.workspace, ".git", "config"), "utf8")).toBe(configBefore)
  }
  return { scripts, check }
}


/** Each delegate call's failure, in order. */
const refusals = (events: ReadonlyArray<Event.Event>) =>
  events.filter((e): e is Event.Of<"ToolFailed"> => e._tag === "ToolFailed").map((e) => e.error.message)

const expected = spellings.map(({ folder }) => expect.stringContaining(`delegate refused: folder "${folder}": it is inside ".git"`))

describe("a sub-goal's folder", () => {
  it.scopedLive("rx run: delegate to .git, .git/hooks, ./.git, sub/../.git or a link into .git is refused; git status and git commit then run no payload", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const { check, scripts } = attack(box)
      const model = yield* treeModel(scripts)
      const ran = yield* rx([
        "run", "[P] plant hooks through sub-goals", "--tools", "read_file,write_file,shell,delegate", "--sandbox", "none", "--max-failures", "20",
        "--db", box.db, "--workspace", box.workspace, "--base-url", model.baseUrl, "--model", "fake"
      ])
      expect(ran.code, ran.stderr).toBe(0)
      const logs = yield* logOf(box.db)
      expect(logs.size, [...logs.keys()].join(", ")).toBe(1)
      expect(refusals([...logs.values()][0] ?? [])).toEqual(expected)
      check()
    }))

  it.scopedLive("rx serve: the same calls of a goal submitted over HTTP are refused; git status and git commit then run no payload", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const { check, scripts } = attack(box)
      const model = yield* treeModel(scripts)
      const { url } = yield* serveRx(box, model.baseUrl, ["--tools", "read_file,write_file,shell,delegate"])
      const token = readFileSync(join(box.root, "rx-server.token"), "utf8").trim()
      const request = (path: string, init: RequestInit = {}) =>
        Effect.promise(() => fetch(`${url}${path}`, { ...init, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" } }))
      const submitted = yield* request("/v1/goals", { method: "POST", body: JSON.stringify({ goal: "[P] plant hooks through sub-goals", options: { maxConsecutiveFailures: 20 } }) })
      expect(submitted.status).toBe(202)
      const { goalId } = (yield* Effect.promise(() => submitted.json())) as { goalId: string }
      const events = jsonLines(yield* Effect.flatMap(request(`/v1/goals/${goalId}/events`), (response) => Effect.promise(() => response.text())))
      expect(events.at(-1)).toMatchObject({ _tag: "Terminated", reason: "done" })
      expect(events.filter((e) => e["_tag"] === "ToolFailed").map((e) => (e["error"] as { message: string }).message)).toEqual(expected)
      expect(existsSync(join(box.workspace, ".git", "hooks", "post-commit"))).toBe(false)
      check()
    }))
})
