import { execFileSync } from 'node:child_process'
import { appendFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { open } from 'node:fs/promises'
import { createServer } from 'node:net'
import { join } from 'node:path'
import t from 'tap'
import { FileRefused, readFailure } from '../lib/file-error.js'
import { readFileHead, readLimitedFile, readLimitedText } from '../lib/read-file.js'

const dir = t.testdir({ 'a.json': '{"a":1}', folder: {}, 'big.txt': 'x'.repeat(2048) })
symlinkSync(join(dir, 'a.json'), join(dir, 'link.json'))
execFileSync('mkfifo', [join(dir, 'fifo')])

t.test('a regular file, and a link to one, is read whole', async (t) => {
  t.equal(await readLimitedText(join(dir, 'a.json'), 100), '{"a":1}')
  t.equal(await readLimitedText(join(dir, 'link.json'), 7), '{"a":1}', 'exactly at the limit')
  t.same(await readLimitedFile(join(dir, 'big.txt'), 2048), Buffer.from('x'.repeat(2048)))
  t.equal((await readLimitedFile(join(dir, 'folder', '..', 'a.json'), 1 << 20)).length, 7)
})

t.test('a file over the limit is refused, in words', async (t) => {
  await t.rejects(readLimitedFile(join(dir, 'big.txt'), 2047), {
    constructor: FileRefused,
    message: 'larger than 2047 bytes, the most this kind of file may hold',
  })
  await t.rejects(readLimitedFile(join(dir, 'big.txt'), 1024), { message: /^larger than 1 KiB,/ })
  const huge = join(dir, 'huge.txt')
  writeFileSync(huge, Buffer.alloc(1048577))
  await t.rejects(readLimitedFile(huge, 1048576), { message: /^larger than 1 MiB,/ })
})

t.test('readFileHead: no more than one byte past the limit, even of a file larger than it says', async (t) => {
  t.equal((await readFileHead(join(dir, 'big.txt'), 100)).length, 101)
  // A /proc file states a size of 0 and holds more: the reads go past the stated size, and stop at the limit.
  t.equal((await readFileHead('/proc/self/maps', 10000)).length, 10001)
  // A file that grows between the stat and the reads.
  const growing = join(dir, 'growing.txt')
  writeFileSync(growing, 'y')
  const handle = await open(growing, 'r')
  appendFileSync(growing, 'y'.repeat(200000))
  await handle.close()
  t.equal((await readFileHead(growing, 150000)).length, 150001)
})

t.test('not a regular file: refused at once, before a byte is read', async (t) => {
  // Opening a FIFO for reading would wait for a writer: this returns (or tap's timeout fails the test).
  await t.rejects(readLimitedFile(join(dir, 'fifo'), 100), {
    constructor: FileRefused,
    message: 'a named pipe (FIFO), where a regular file is expected',
  })
  await t.rejects(readLimitedFile('/dev/zero', 1 << 20), { message: 'a device, where a regular file is expected' })
  await t.rejects(readLimitedFile(join(dir, 'folder'), 100), { message: 'a folder, where a file is expected' })
  await t.rejects(readLimitedFile(join(dir, 'missing'), 100), { code: 'ENOENT' })
})

t.test('readFailure: the refusal in its own words, and a socket named for what it is', async (t) => {
  t.equal(
    readFailure(new FileRefused('a device, where a regular file is expected')),
    'a device, where a regular file is expected',
  )
  const socket = join(dir, 'socket')
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(socket, resolve))
  t.teardown(() => server.close())
  const error: unknown = await readLimitedFile(socket, 100).catch((error: unknown) => error)
  t.equal(readFailure(error), 'a socket or a device, where a regular file is expected')
})
