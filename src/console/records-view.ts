// Variables and file records of the emulator: lists with forms to create, edit and delete them, each form sent
// by the page's script to the admin routes (/__admin/variables, /__admin/files) with the admin token.
import type { Variable } from '../api/types.ts';
import type { EmulatedFile } from '../emulator/file-store.ts';
import { html, shortTime, type SafeHtml } from './html.ts';

const error = html`<span class="form-error" role="alert"></span>`;

export function variablesSection(variables: readonly (Variable & { etag: string })[]): SafeHtml {
  const rows = variables.map((v) => {
    const url = `/__admin/variables/${encodeURIComponent(v.id)}`;
    return html`<tr data-variable="${v.key}">
      <td>${v.id}</td>
      <td>${v.key}</td>
      <td>${v.etag}</td>
      <td>
        <form class="edit-variable" data-method="PUT" data-url="${url}">
          <input name="name" value="${v.name}" aria-label="name of ${v.key}" />
          <input
            name="value"
            value="${v.secret ? '' : v.value}"
            placeholder="${v.secret ? '(secret: type a new value)' : ''}"
            aria-label="value of ${v.key}"
            ${v.secret ? '' : html`data-keep-empty`}
          />
          <label><input type="checkbox" name="secret" ${v.secret ? html`checked` : ''} /> secret</label>
          <button type="submit">Save</button> ${error}
        </form>
      </td>
      <td>${deleteForm('delete-variable', url)}</td>
    </tr>`;
  });
  return html`<section>
    <h2>Variables</h2>
    <form id="new-variable" data-method="POST" data-url="/__admin/variables">
      <input name="key" placeholder="key" aria-label="new variable key" required />
      <input name="name" placeholder="name (default: the key)" aria-label="new variable name" />
      <input name="value" placeholder="value" aria-label="new variable value" data-keep-empty />
      <label><input type="checkbox" name="secret" /> secret</label>
      <button type="submit">Create variable</button> ${error}
    </form>
    ${recordTable('variables', ['Id', 'Key', 'Version', 'Name, value', ''], rows, 'No variable.')}
  </section>`;
}

export function filesSection(files: readonly EmulatedFile[]): SafeHtml {
  const rows = files.map((f) => {
    const url = `/__admin/files/${encodeURIComponent(f.id)}`;
    return html`<tr data-file="${f.name}">
      <td>${f.id}</td>
      <td>${f.size} bytes</td>
      <td>${f.contentType}</td>
      <td>${shortTime(f.createdAt)}</td>
      <td>
        <form class="rename-file" data-method="PUT" data-url="${url}">
          <input name="name" value="${f.name}" aria-label="name of ${f.id}" />
          <button type="submit">Rename</button> ${error}
        </form>
      </td>
      <td>${deleteForm('delete-file', url)}</td>
    </tr>`;
  });
  return html`<section>
    <h2>Files</h2>
    <p>
      The emulator keeps file records (name, size, type), not their content, as an upload through the
      service's files API would make them.
    </p>
    <form id="new-file" data-method="POST" data-url="/__admin/files">
      <input name="name" placeholder="file name" aria-label="new file name" required />
      <input
        name="contentType"
        placeholder="content type (default application/octet-stream)"
        aria-label="new file content type"
      />
      <textarea
        name="content"
        rows="2"
        placeholder="content (text; its size is recorded)"
        aria-label="new file content"
      ></textarea>
      <button type="submit">Add file</button> ${error}
    </form>
    ${recordTable('files', ['Id', 'Size', 'Type', 'Created', 'Name', ''], rows, 'No file.')}
  </section>`;
}

function deleteForm(className: string, url: string): SafeHtml {
  return html`<form class="${className} inline" data-method="DELETE" data-url="${url}">
    <button type="submit">Delete</button> ${error}
  </form>`;
}

/** The records as a table with one heading row, or `empty` when there is none. */
function recordTable(
  id: string,
  headings: readonly string[],
  rows: readonly SafeHtml[],
  empty: string,
): SafeHtml {
  if (rows.length === 0) return html`<p>${empty}</p>`;
  return html`<table id="${id}">
    <thead>
      <tr>
        ${headings.map((heading) => html`<th>${heading}</th>`)}
      </tr>
    </thead>
    <tbody>
      ${rows}
    </tbody>
  </table>`;
}
