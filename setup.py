"Packaging for conslaw_nb: every setting comes from settings.ini (read with configparser, no pkg_resources)."
from configparser import ConfigParser
import setuptools

cfg = ConfigParser(delimiters=['='])
cfg.read('settings.ini', encoding='utf-8')
cfg = cfg['DEFAULT']

licenses = {'apache2': ('Apache Software License 2.0', 'OSI Approved :: Apache Software License')}
statuses = ['1 - Planning', '2 - Pre-Alpha', '3 - Alpha', '4 - Beta', '5 - Production/Stable', '6 - Mature', '7 - Inactive']
lic = licenses[cfg['license']]
req = cfg.get('requirements', '').split()
dev_req = cfg.get('dev_requirements', '').split()
hf_req = cfg.get('hf_requirements', '').split()
scripts = [s for s in cfg.get('console_scripts', '').split() if s]

setuptools.setup(
    name=cfg['lib_name'],
    version=cfg['version'],
    description=cfg['description'],
    long_description=open('README.md', encoding='utf-8').read(),
    long_description_content_type='text/markdown',
    author=cfg['author'], author_email=cfg['author_email'],
    license=lic[0],
    classifiers=['Development Status :: ' + statuses[int(cfg['status'])],
                 'Intended Audience :: ' + cfg['audience'],
                 'License :: ' + lic[1],
                 'Natural Language :: ' + cfg['language']] +
                ['Programming Language :: Python :: 3.' + v for v in ('9', '10', '11', '12')],
    url=cfg['git_url'],
    keywords=cfg['keywords'].split(),
    project_urls={'Documentation': cfg['doc_host'] + cfg['doc_baseurl'], 'Source': cfg['git_url']},
    packages=setuptools.find_packages(include=[cfg['lib_name'], cfg['lib_name'] + '.*']),
    include_package_data=True,
    install_requires=req,
    extras_require={'dev': dev_req, 'hf': hf_req},
    python_requires='>=' + cfg['min_python'],
    zip_safe=False,
    entry_points={'console_scripts': scripts, 'nbdev': [f"{cfg['lib_path']}={cfg['lib_path']}._modidx:d"]},
)
