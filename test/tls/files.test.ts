import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { copyFile, rename, rm, symlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import t from 'tap'
import { POLICY_WATCH_DEFAULTS } from '../../lib/defaults.js'
import { watchTlsFiles, type TlsFile } from '../../lib/tls/files.js'
import { PemRefusal } from '../../lib/tls/pem.js'
import type { ReloadOutcome } from '../../lib/watch.js'
import { until } from '../helpers/wait.js'

let builds = 0
/** Files of text: a version is refused when its first file says `bad`. */
function build(texts: readonly Buffer[]): string {
  builds++
  const joined = texts.map(String).join('+')
  if (texts[0]?.toString() === 'bad') throw new PemRefusal(0, 'says bad')
  return joined
}

function recorder() {
  const outcomes: ReloadOutcome[] = []
  const warnings: unknown[] = []
  const logger = { info: () => undefined, warn: (fields: unknown) => void warnings.push(fields) }
  return {
    outcomes,
    warnings,
    options: { logger, onReload: (outcome: ReloadOutcome) => void outcomes.push(outcome), debounceMs: 5, rescanMs: 20 },
  }
}

/** Written aside, then renamed over: never seen half-written. */
async function replace(file: string, text: string): Promise<void> {
  await writeFile(`${file}.tmp`, text)
  await rename(`${file}.tmp`, file)
}

t.test('start: a file that cannot be read or built is the problem, naming its file', async (t) => {
  const dir = t.testdir({ a: 'bad', b: 'x' })
  const files: TlsFile[] = [
    { key: 'tlsCert', path: join(dir, 'a') },
    { key: 'tlsKey', path: join(dir, 'missing') },
  ]
  await t.rejects(watchTlsFiles(files, build), {
    message: `${join(dir, 'missing')}: no such file or folder`,
    reason: 'no such file or folder',
    file: { key: 'tlsKey' },
  })
  await t.rejects(watchTlsFiles([{ key: 'tlsCa', path: '/dev/zero' }], build), {
    message: '/dev/zero: a device, where a regular file is expected',
    file: { key: 'tlsCa' },
  })
  await t.rejects(watchTlsFiles([files[0] as TlsFile], build), {
    message: `${join(dir, 'a')}: says bad`,
    file: { key: 'tlsCert' },
  })
})

t.test(
  'reloads: a new version applied and told; a refused one kept out, reported once, again on a forced reload; put back',
  async (t) => {
    const dir = t.testdir({ certs: { a: 'one', b: 'two' }, keys: {} })
    const a = join(dir, 'certs', 'a')
    const b = join(dir, 'keys', 'b')
    await copyFile(join(dir, 'certs', 'b'), b)
    const { outcomes, warnings, options } = recorder()
    const watched = await watchTlsFiles(
      [
        { key: 'tlsCert', path: a },
        { key: 'tlsKey', path: b },
      ],
      build,
      options,
    )
    t.teardown(() => watched.close())
    const seen: string[] = []
    watched.onChange((value) => void seen.push(value))
    t.equal(watched.current, 'one+two')

    await replace(b, 'three')
    t.ok(await until(() => watched.current === 'one+three'), 'a rename in the second folder is seen')
    t.same(seen, ['one+three'])
    t.same(outcomes.at(-1), { applied: true, refused: [], refusedNow: 0 })

    await replace(a, 'bad')
    t.ok(await until(() => warnings.length === 1))
    t.equal(watched.current, 'one+three', 'the last good version stays')
    t.same(outcomes.at(-1), { applied: false, refused: [{ file: a, reason: 'says bad' }], refusedNow: 1 })
    const told = outcomes.length
    const built = builds
    t.ok(await until(() => builds >= built + 3), 're-scanned')
    t.equal(outcomes.length, told, 'the re-scans do not report the same refused version again')
    await watched.reload()
    t.equal(outcomes.length, told + 1, 'a forced reload (SIGHUP) does')

    await rm(a)
    await watched.reload()
    t.match(warnings.at(-1), { file: a, reason: 'no such file or folder' })

    // A FIFO put in a file's place: the reload is refused at once instead of waiting for a writer forever.
    execFileSync('mkfifo', [a])
    await watched.reload()
    t.match(warnings.at(-1), { file: a, reason: 'a named pipe (FIFO), where a regular file is expected' })
    t.equal(watched.current, 'one+three', 'the last good version stays')
    await rm(a)

    await replace(a, 'one')
    await watched.reload()
    t.same(outcomes.at(-1), { applied: true, refused: [], refusedNow: 0 }, 'the good version back: nothing refused')
    t.same(seen, ['one+three'], 'the same bytes as in force: nothing new to apply')
  },
)

t.test("a Secret's ..data symlink swap is seen", async (t) => {
  const dir = t.testdir({ v1: { 'tls.crt': 'first' }, v2: { 'tls.crt': 'second' } })
  await symlink('v1', join(dir, '..data'))
  await symlink('..data/tls.crt', join(dir, 'tls.crt'))
  const { options } = recorder()
  const watched = await watchTlsFiles([{ key: 'tlsCert', path: join(dir, 'tls.crt') }], build, options)
  t.teardown(() => watched.close())
  t.equal(watched.current, 'first')
  await symlink('v2', join(dir, '..data_tmp'))
  await rename(join(dir, '..data_tmp'), join(dir, '..data'))
  t.ok(await until(() => watched.current === 'second'))
})

t.test('a refusal is reported only when a second read finds the same bytes', async (t) => {
  const dir = t.testdir({ 'tls.crt': 'cert-1', 'tls.key': 'key-1' })
  const cert = join(dir, 'tls.crt')
  const key = join(dir, 'tls.key')
  /** Between two reads, the test's own step: what a renewal did meanwhile. */
  let onRefusal = (): void => undefined
  let refusals = 0
  // A pair is whole when its two files name the same version.
  const pair = (texts: readonly Buffer[]): string => {
    const [c, k] = texts.map((text) => String(text).split('-')[1])
    if (c !== k) {
      refusals++
      onRefusal()
      throw new PemRefusal(1, 'does not match the certificate')
    }
    return `version ${c}`
  }
  const { outcomes, warnings, options } = recorder()
  const watched = await watchTlsFiles(
    [
      { key: 'tlsCert', path: cert },
      { key: 'tlsKey', path: key },
    ],
    pair,
    { ...options, rescanMs: 60_000 },
  )
  t.teardown(() => watched.close())

  // A read across a Secret's swap: the certificate read before it, the key after; the swap is whole by the next read.
  writeFileSync(key, 'key-2')
  onRefusal = () => writeFileSync(cert, 'cert-2')
  await watched.reload()
  t.equal(watched.current, 'version 2', 'the whole new version, read again, is taken')
  t.equal(refusals, 1)
  t.same(warnings, [], 'no refusal logged')
  t.same(outcomes.at(-1), { applied: true, refused: [], refusedNow: 0 }, 'nor reported')

  // Files that change at every read: the refusal is reported after the bounded reads.
  writeFileSync(key, 'key-3')
  let next = 4
  onRefusal = () => writeFileSync(key, `key-${next++}`)
  await watched.reload()
  t.equal(refusals, 1 + POLICY_WATCH_DEFAULTS.tlsRefusalReads, 'read no more than the bound')
  t.equal(warnings.length, 1)
  t.same(outcomes.at(-1), {
    applied: false,
    refused: [{ file: key, reason: 'does not match the certificate' }],
    refusedNow: 1,
  })
  t.equal(watched.current, 'version 2', 'the last good version stays')

  // A refusal that stays the same at a second read is reported after two reads.
  onRefusal = () => undefined
  const before = refusals
  await watched.reload()
  t.equal(refusals, before + 2)
  t.equal(warnings.length, 2)
})
