// Cross-CPU wake-up latency (docs/bench-rt.md, session 18): a sender pinned to
// CPU 0 sleeps 0.5-5 ms, then writes its CLOCK_MONOTONIC time into a pipe; a
// receiver pinned to CPU 1 blocks in read (its CPU idles between) and records
// now - sent. Build: cc -O2 -pthread rt-wake-latency.c; run: ./a.out [N].
// Compare with and without a process holding /dev/cpu_dma_latency open with
// a 4-byte 0 written (e.g. python3 -c "import os,struct,time;
// f=os.open('/dev/cpu_dma_latency',os.O_WRONLY);os.write(f,struct.pack('i',0));
// time.sleep(10)").
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static int p[2];
static int N;
static long long now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000LL+t.tv_nsec;}
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);sched_setaffinity(0,sizeof s,&s);}
static long long *lat;
static void *rx(void*a){pin(1);for(int i=0;i<N;i++){long long t;if(read(p[0],&t,8)!=8)exit(1);lat[i]=now()-t;}return 0;}
static int cmp(const void*a,const void*b){long long x=*(long long*)a,y=*(long long*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){N=argc>1?atoi(argv[1]):1500;lat=calloc(N,8);pipe(p);pthread_t t;pthread_create(&t,0,rx,0);pin(0);
 srand(1);for(int i=0;i<N;i++){struct timespec d={0,500000+rand()%4500000};nanosleep(&d,0);long long x=now();write(p[1],&x,8);}
 pthread_join(t,0);qsort(lat,N,8,cmp);int over=0;for(int i=0;i<N;i++)if(lat[i]>1000000)over++;
 printf("n=%d p50=%.1fus p99=%.1fus p99.9=%.1fus max=%.1fus over1ms=%d\n",N,lat[N/2]/1e3,lat[N*99/100]/1e3,lat[N*999/1000]/1e3,lat[N-1]/1e3,over);return 0;}
