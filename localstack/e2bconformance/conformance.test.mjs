// The sandbox API's conformance suite: the unmodified E2B SDK (the package
// at $E2B_SDK: a pinned version, or e2b@latest for make e2b-latest) against
// a dev server, through E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY only.
// TestE2BConformance runs it once per SDK version.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { pathToFileURL } from 'node:url'
import { join } from 'node:path'

const sdkDir = process.env.E2B_SDK
assert.ok(sdkDir, 'E2B_SDK names the SDK package folder')
const pkg = (await import(pathToFileURL(join(sdkDir, 'package.json')).href, { with: { type: 'json' } })).default
const { Sandbox, CommandExitError, NotFoundError } = await import(pathToFileURL(join(sdkDir, pkg.main)).href)

const created = []
async function sandbox(opts = {}) {
  const sbx = await Sandbox.create({ timeoutMs: 300_000, ...opts })
  created.push(sbx)
  return sbx
}
after(async () => {
  await Promise.all(created.map((s) => s.kill().catch(() => {})))
})

// until resolves once check holds: it waits on the events the SDK delivers,
// polling what it cannot be told (a bound only fails a check that never
// holds).
async function until(what, check, ms = 20_000) {
  const end = Date.now() + ms
  for (;;) {
    if (await check()) return
    if (Date.now() > end) assert.fail(`${what}: not within ${ms} ms`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

const dec = new TextDecoder()
const enc = new TextEncoder()

test('lifecycle: create, info, list by metadata, timeout, kill', async () => {
  const tag = randomBytes(6).toString('hex')
  const sbx = await sandbox({ metadata: { suite: 'conformance', tag, 'odd key': 'a&b=c' } })
  assert.match(sbx.sandboxId, /^[0-9a-f-]{36}$/)
  assert.equal(await sbx.isRunning(), true)

  const info = await sbx.getInfo()
  assert.equal(info.sandboxId, sbx.sandboxId)
  assert.equal(info.state, 'running')
  assert.equal(info.metadata.tag, tag)
  assert.ok(info.endAt.getTime() > Date.now() + 250_000, `ends at ${info.endAt}`)

  const page = await Sandbox.list({ query: { metadata: { tag, 'odd key': 'a&b=c' } } }).nextItems()
  assert.deepEqual(page.map((s) => s.sandboxId), [sbx.sandboxId])
  assert.deepEqual(await Sandbox.list({ query: { metadata: { tag: 'none-' + tag } } }).nextItems(), [])

  await sbx.setTimeout(600_000)
  assert.ok((await sbx.getInfo()).endAt.getTime() > Date.now() + 590_000)

  assert.equal(await sbx.kill(), true)
  assert.equal(await Sandbox.kill(sbx.sandboxId), false)
  await assert.rejects(Sandbox.connect(sbx.sandboxId), (e) => e.name === 'SandboxNotFoundError' || e instanceof NotFoundError || /not found/i.test(e.message))
})

test('a sandbox ends at its timeout', async () => {
  const sbx = await sandbox()
  await sbx.setTimeout(1_000)
  await until('the sandbox ended', async () => !(await Sandbox.list({ query: { state: ['running', 'paused'] } }).nextItems()).some((s) => s.sandboxId === sbx.sandboxId))
  assert.equal(await sbx.isRunning(), false)
})

test('commands: foreground, env vars, cwd, non-zero exits', async () => {
  const sbx = await sandbox({ envs: { FROM_CREATE: 'create' } })
  const r = await sbx.commands.run('echo "$FROM_CREATE $FROM_RUN"; echo err >&2', { envs: { FROM_RUN: 'run' } })
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'create run\n')
  assert.equal(r.stderr, 'err\n')

  await sbx.files.makeDir('/home/user/sub')
  assert.equal((await sbx.commands.run('touch here', { cwd: '/home/user/sub' })).exitCode, 0)
  assert.equal(await sbx.files.exists('/home/user/sub/here'), true)

  await assert.rejects(sbx.commands.run('echo partial; exit 7'), (e) => {
    assert.ok(e instanceof CommandExitError, e)
    assert.equal(e.exitCode, 7)
    assert.equal(e.stdout, 'partial\n')
    return true
  })
})

test('commands: background, streaming, wait, list, kill, re-attach', async () => {
  const sbx = await sandbox()
  const lines = []
  const h = await sbx.commands.run('for i in 1 2 3; do echo tick $i; sleep 0.1; done', { background: true, onStdout: (d) => lines.push(d) })
  const res = await h.wait()
  assert.equal(res.exitCode, 0)
  assert.equal(lines.join(''), 'tick 1\ntick 2\ntick 3\n')

  const long = await sbx.commands.run('echo started; sleep 300', { background: true })
  await until('the long command listed', async () => (await sbx.commands.list()).some((p) => p.pid === long.pid))
  const seen = []
  const again = await sbx.commands.connect(long.pid, { onStdout: (d) => seen.push(d) })
  assert.equal(again.pid, long.pid)
  assert.equal(await sbx.commands.kill(long.pid), true)
  await assert.rejects(again.wait(), (e) => e instanceof CommandExitError)
  assert.equal(await sbx.commands.kill(long.pid), false)
})

test('commands: stdin', async () => {
  const sbx = await sandbox()
  const out = []
  const h = await sbx.commands.run('read a; echo "got $a"; cat', { background: true, stdin: true, onStdout: (d) => out.push(d) })
  await sbx.commands.sendStdin(h.pid, 'first\n')
  await until('the first line answered', () => out.join('').includes('got first'))
  await sbx.commands.sendStdin(h.pid, 'rest\n')
  await sbx.commands.closeStdin(h.pid)
  const res = await h.wait()
  assert.equal(res.stdout, 'got first\nrest\n')
})

test('files: write, read, list, info, rename, remove, many at once', async () => {
  const sbx = await sandbox()
  const info = await sbx.files.write('/home/user/dir/a.txt', 'alpha')
  assert.equal(info.path, '/home/user/dir/a.txt')
  assert.equal(await sbx.files.read('/home/user/dir/a.txt'), 'alpha')
  assert.equal(await sbx.files.read('dir/a.txt'), 'alpha')
  const bytes = await sbx.files.read('/home/user/dir/a.txt', { format: 'bytes' })
  assert.equal(dec.decode(bytes), 'alpha')

  await sbx.files.write([{ path: '/home/user/dir/b.txt', data: 'beta' }, { path: '/home/user/dir/c.bin', data: new Uint8Array([0, 1, 2, 255]) }])
  const names = (await sbx.files.list('/home/user/dir')).map((e) => e.name).sort()
  assert.deepEqual(names, ['a.txt', 'b.txt', 'c.bin'])
  const st = await sbx.files.getInfo('/home/user/dir/c.bin')
  assert.equal(st.type, 'file')
  assert.equal(st.size, 4)

  assert.equal(await sbx.files.makeDir('/home/user/dir/nested'), true)
  assert.equal(await sbx.files.makeDir('/home/user/dir/nested'), false)
  await sbx.files.rename('/home/user/dir/b.txt', '/home/user/dir/nested/b2.txt')
  assert.equal(await sbx.files.exists('/home/user/dir/b.txt'), false)
  assert.equal(await sbx.files.read('/home/user/dir/nested/b2.txt'), 'beta')
  assert.equal((await sbx.files.list('/home/user/dir', { depth: 2 })).length, 4)
  await sbx.files.remove('/home/user/dir/nested')
  assert.equal(await sbx.files.exists('/home/user/dir/nested'), false)
  await assert.rejects(sbx.files.read('/home/user/missing.txt'), (e) => e.name === 'FileNotFoundError' || e instanceof NotFoundError)
  // What a command wrote, the file API reads.
  await sbx.commands.run('printf from-bash > made.txt')
  assert.equal(await sbx.files.read('/home/user/made.txt'), 'from-bash')
})

test('files: large, gzip both ways, octet-stream', async () => {
  const sbx = await sandbox()
  const big = randomBytes(20 << 20)
  await sbx.files.write('/home/user/big.bin', big)
  const back = await sbx.files.read('/home/user/big.bin', { format: 'bytes' })
  assert.equal(Buffer.compare(Buffer.from(back), big), 0)
  const sum = (await sbx.commands.run('sha256sum big.bin')).stdout.split(' ')[0]
  const { createHash } = await import('node:crypto')
  assert.equal(sum, createHash('sha256').update(big).digest('hex'))

  const text = 'compressible '.repeat(10000)
  await sbx.files.write('/home/user/z.txt', text, { gzip: true })
  assert.equal(await sbx.files.read('/home/user/z.txt', { gzip: true }), text)
  await sbx.files.write('/home/user/o.txt', 'octets', { useOctetStream: true })
  assert.equal(await sbx.files.read('/home/user/o.txt'), 'octets')
})

test('files: watch a folder', async () => {
  const sbx = await sandbox()
  await sbx.files.makeDir('/home/user/watched')
  const events = []
  const w = await sbx.files.watchDir('/home/user/watched', (e) => events.push(e), { recursive: true })
  await sbx.files.write('/home/user/watched/new.txt', 'x')
  await until('a create event', () => events.some((e) => e.name === 'new.txt' && e.type === 'create'))
  await sbx.files.remove('/home/user/watched/new.txt')
  await until('a remove event', () => events.some((e) => e.name === 'new.txt' && e.type === 'remove'))
  await w.stop()
})

test('terminals: create, input, resize, re-attach, kill', async () => {
  const sbx = await sandbox()
  let out = ''
  const term = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += dec.decode(d) } })
  await sbx.pty.sendInput(term.pid, enc.encode('echo "cols=$(tput cols)"\n'))
  await until('the first answer', () => out.includes('cols=80'))
  await sbx.pty.resize(term.pid, { cols: 100, rows: 30 })
  await sbx.pty.sendInput(term.pid, enc.encode('echo "now=$(tput cols)"\n'))
  await until('the resized answer', () => out.includes('now=100'))

  let later = ''
  const again = await sbx.pty.connect(term.pid, { onData: (d) => { later += dec.decode(d) } })
  await sbx.pty.sendInput(term.pid, enc.encode('echo re-attached\n'))
  await until('output on the re-attached handle', () => later.includes('re-attached'))
  assert.equal(await sbx.pty.kill(term.pid), true)
  await again.wait().catch(() => {})
})

test('pause, then connect resumes it with its files', async () => {
  const sbx = await sandbox()
  await sbx.files.write('/home/user/kept.txt', 'kept across the pause')
  assert.equal(await sbx.pause(), true)
  assert.equal(await Sandbox.pause(sbx.sandboxId), false)
  assert.equal((await sbx.getInfo()).state, 'paused')
  assert.equal(await sbx.isRunning(), false)

  const back = await Sandbox.connect(sbx.sandboxId)
  assert.equal(await back.isRunning(), true)
  assert.equal(await back.files.read('/home/user/kept.txt'), 'kept across the pause')
  assert.equal((await back.commands.run('cat kept.txt')).stdout, 'kept across the pause')
  const again = await Sandbox.connect(sbx.sandboxId)
  assert.equal(again.sandboxId, sbx.sandboxId)
})
