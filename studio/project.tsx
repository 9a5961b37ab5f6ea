import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { canAdmin, type ProjectRef } from './api.ts';
import { projectConfig, type ProjectConfig } from './models.ts';
import { BASE, match, onLink } from './router.ts';
import { RecordList } from './records.tsx';
import { lazy } from './lazy.tsx';
import { ReleasesPanel } from './releases.tsx';
import { CustomersPanel, FilesPanel, KeysPanel, OperationsPanel, SchedulesPanel } from './panels.tsx';
import { AuditPanel, ScheduledPanel } from './editorial.tsx';

const RecordScreen = lazy(() => import('./editor/record-screen.tsx').then((m) => m.RecordScreen));
const Explorer = lazy(() => import('./explorer.tsx').then((m) => m.Explorer));

/** The project's screens; `admin`: only owners and admins may use it (the server refuses others). */
const SECTIONS: readonly (readonly [string, string, { admin?: boolean }?])[] = [
  ['releases', 'Releases'],
  ['files', 'Files'],
  ['keys', 'API keys', { admin: true }],
  ['customers', 'Customers'],
  ['operations', 'Operations'],
  ['schedules', 'Schedules'],
  ['scheduled', 'Scheduled'],
  ['audit', 'Audit log', { admin: true }],
  ['graphql', 'GraphQL explorer'],
];

export function ProjectShell({ project, path }: { project: ProjectRef; path: string }) {
  const [config, setConfig] = useState<ProjectConfig | null>(null);
  const [error, setError] = useState('');
  useEffect(() => {
    setConfig(null);
    projectConfig(project.id).then(setConfig, (e: Error) => setError(e.message));
  }, [project.id]);
  const base = `${BASE}/p/${encodeURIComponent(project.id)}`;
  const here = '/' + path;
  const models = config?.models ?? [];
  const nav = (
    <nav class="side" aria-label="Project">
      <h2>Models</h2>
      <ul>
        {models.map((m) => (
          <li key={m.key}>
            <a
              href={`${base}/m/${m.key}`}
              onClick={onLink}
              aria-current={here.startsWith(`/m/${m.key}`) ? 'page' : undefined}
            >
              {m.name || m.key}
            </a>
          </li>
        ))}
        {config && models.length === 0 && <li class="muted">No models yet (svc push)</li>}
      </ul>
      <h2>Project</h2>
      <ul>
        {SECTIONS.filter(([, , o]) => !o?.admin || canAdmin(project.role)).map(([k, label]) => (
          <li key={k}>
            <a href={`${base}/${k}`} onClick={onLink} aria-current={here === `/${k}` ? 'page' : undefined}>
              {label}
            </a>
          </li>
        ))}
      </ul>
    </nav>
  );
  let body: ComponentChildren;
  if (error)
    body = (
      <p role="alert" class="error">
        {error}
      </p>
    );
  else if (!config)
    body = (
      <p aria-busy="true" class="muted">
        Loading…
      </p>
    );
  else {
    const rec = match('/m/:model/r/:id', here);
    const list = match('/m/:model', here);
    const key = (rec ?? list)?.model;
    const model = models.find((m) => m.key === key);
    if (rec && model)
      body = <RecordScreen key={rec.id} project={project} config={config} model={model} recordId={rec.id!} />;
    else if (list && model) body = <RecordList key={model.key} project={project} model={model} />;
    else if (here === '/releases') body = <ReleasesPanel project={project} />;
    else if (here === '/files') body = <FilesPanel project={project} />;
    else if (here === '/keys')
      body = canAdmin(project.role) ? (
        <KeysPanel project={project} />
      ) : (
        <p role="alert" class="error">
          Only owners and admins manage API keys.
        </p>
      );
    else if (here === '/customers') body = <CustomersPanel project={project} />;
    else if (here === '/operations') body = <OperationsPanel project={project} config={config} />;
    else if (here === '/schedules') body = <SchedulesPanel project={project} />;
    else if (here === '/scheduled') body = <ScheduledPanel project={project} />;
    else if (here === '/audit') body = <AuditPanel project={project} />;
    else if (here === '/graphql') body = <Explorer project={project} config={config} />;
    else
      body = (
        <section>
          <h1>{config.project.name}</h1>
          <ul class="cards" aria-label="Models">
            {models.map((m) => (
              <li key={m.key}>
                <a class="card" href={`${base}/m/${m.key}`} onClick={onLink}>
                  <strong>{m.name || m.key}</strong>
                  <span class="muted">
                    {m.fields.length} fields{m.versioned === false ? ' · unversioned' : ''}
                  </span>
                </a>
              </li>
            ))}
          </ul>
        </section>
      );
  }
  return (
    <div class="project">
      {nav}
      <main class="content">{body}</main>
    </div>
  );
}
