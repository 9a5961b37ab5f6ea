import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { loadSession, onSignedOut, request, setCsrf, type Session } from './api.ts';
import { BASE, match, navigate, onLink, usePath } from './router.ts';
import { SignIn } from './sign-in.tsx';
import { ProjectShell } from './project.tsx';
import './styles.css';

function Projects({ session }: { session: Session }) {
  if (session.projects.length === 0)
    return (
      <main class="page">
        <h1>Projects</h1>
        <p>You are not a member of any project yet: ask an owner or admin.</p>
      </main>
    );
  return (
    <main class="page">
      <h1>Projects</h1>
      <ul class="cards" aria-label="Projects">
        {session.projects.map((p) => (
          <li key={p.id}>
            <a class="card" href={`${BASE}/p/${encodeURIComponent(p.id)}`} onClick={onLink}>
              <strong>{p.name}</strong>
              <span class="muted">{p.id}</span>
              <span class={`badge role-${p.role}`}>{p.role}</span>
            </a>
          </li>
        ))}
      </ul>
    </main>
  );
}

function App() {
  const path = usePath();
  const [session, setSession] = useState<Session | null | undefined>(undefined);
  const [error, setError] = useState('');
  const refresh = () => loadSession().then(setSession, (e: Error) => setError(e.message));
  useEffect(() => {
    void refresh();
    return onSignedOut(() => setSession(null));
  }, []);
  if (error)
    return (
      <main class="page">
        <p role="alert">{error}</p>
      </main>
    );
  if (session === undefined)
    return (
      <main class="page" aria-busy="true">
        <p>Loading…</p>
      </main>
    );
  if (session === null || path === '/welcome') {
    return (
      <SignIn
        welcome={path === '/welcome'}
        onSignedIn={() => {
          void refresh().then(() => navigate(path === '/welcome' || path === '/login' ? '/' : path, true));
        }}
      />
    );
  }
  const signOut = async () => {
    await request('POST', '/studio/api/logout').catch(() => {});
    setCsrf('');
    setSession(null);
    navigate('/login', true);
  };
  const p = match('/p/:pid', path.split('/').slice(0, 3).join('/'));
  const project = p ? session.projects.find((x) => x.id === p.pid) : undefined;
  return (
    <div class="app">
      <header class="top">
        <a class="brand" href={`${BASE}/`} onClick={onLink}>
          svc Studio
        </a>
        <span class="muted tenant">{session.tenant.name}</span>
        {project && (
          <span class="crumb">
            {project.name} <span class={`badge role-${project.role}`}>{project.role}</span>
          </span>
        )}
        <span class="grow" />
        <span class="muted who">{session.email}</span>
        <button type="button" class="ghost" onClick={signOut}>
          Sign out
        </button>
      </header>
      {p ? (
        project ? (
          <ProjectShell project={project} path={path.split('/').slice(3).join('/')} />
        ) : (
          <main class="page">
            <h1>Project not found</h1>
            <p>It does not exist, or you are not a member.</p>
          </main>
        )
      ) : (
        <Projects session={session} />
      )}
    </div>
  );
}

render(<App />, document.getElementById('app')!);
